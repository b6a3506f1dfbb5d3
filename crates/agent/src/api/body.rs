//! The JSON body extractor: refusals are JSON errors naming the field (axum's own
//! `Json` answers in plain text and without the path), and a body over the limit is 413.

use crate::error::ApiError;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

/// A request body parsed as JSON into `T`.
pub struct Body<T>(pub T);

/// The body size limit (set on the router with `DefaultBodyLimit`, read here for the
/// message).
#[derive(Clone, Copy)]
pub struct Limit(pub usize);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let limit = req.extensions().get::<Limit>().map_or(0, |l| l.0);
        let bytes = Bytes::from_request(req, state).await.map_err(|r| {
            if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::TooLarge { limit }
            } else {
                ApiError::BadRequest {
                    message: r.body_text(),
                    field: None,
                }
            }
        })?;
        parse(&bytes).map(Body)
    }
}

/// Parses JSON: a body that is not JSON is 400; valid JSON of the wrong shape (a wrong
/// type, a missing or unknown field) is 422 with its path.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let v: Result<T, _> = serde_path_to_error::deserialize(&mut de);
    // Trailing characters after the value make the body invalid JSON.
    if v.is_ok()
        && let Err(e) = de.end()
    {
        return Err(not_json(&e));
    }
    v.map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        // serde_json reports some shape errors as syntax errors (an enum given a number:
        // "expected value"), so syntax is judged on the body alone, read as any JSON.
        if inner.classify() != serde_json::error::Category::Data && !is_json(bytes) {
            return not_json(&inner);
        }
        let message = match inner.classify() {
            serde_json::error::Category::Data => inner.to_string(),
            _ => format!(
                "wrong shape: expected an object with one key naming the kind (such as \
                 {{\"create\": ...}} or {{\"route\": ...}}), or the kind as a string ({inner})"
            ),
        };
        ApiError::Invalid {
            field: field_of(&path, &message),
            message,
        }
    })
}

fn not_json(e: &serde_json::Error) -> ApiError {
    ApiError::BadRequest {
        message: format!("the body is not valid JSON: {e}"),
        field: None,
    }
}

/// Whether `bytes` are one JSON value (of any shape).
fn is_json(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok()
}

/// The field a data error is about. serde's path stops at the object for a missing
/// field, so its name is taken from the message ("missing field `x`").
fn field_of(path: &str, message: &str) -> String {
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|m| m.split('`').next());
    match (path, missing) {
        (".", Some(f)) => f.to_string(),
        (".", None) => "(body)".to_string(),
        (p, Some(f)) => format!("{p}.{f}"),
        (p, None) => p.to_string(),
    }
}
