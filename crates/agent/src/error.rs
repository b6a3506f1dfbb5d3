//! The API's one error type: an HTTP status class, a message, and the field it is about.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// Why a request was refused (or, for `Internal`, failed). Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// The body is not JSON, or a path or query parameter does not parse.
    #[error("{message}")]
    BadRequest {
        message: String,
        field: Option<String>,
    },
    /// A field has the wrong type, is missing, or the configuration it makes is invalid.
    #[error("{message}")]
    Invalid { message: String, field: String },
    #[error("{0}")]
    NotFound(String),
    /// The object exists already, or something still refers to it.
    #[error("{message}")]
    Conflict {
        message: String,
        field: Option<String>,
    },
    #[error("request body larger than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("missing or wrong bearer token")]
    Unauthorized,
    /// The forwarding worker did not answer (stopping, or not running).
    #[error("{0}")]
    Unavailable(String),
    /// The forwarding worker's queue is full: 503 with Retry-After.
    #[error("{0}")]
    Busy(String),
    #[error("{0}")]
    Internal(String),
}

/// The JSON body of every error response.
#[derive(Debug, Serialize, serde::Deserialize, ToSchema)]
pub struct ErrorBody {
    /// What is wrong.
    pub error: String,
    /// Where: a path into the request body ("prefix", "changes[2].create.route.nexthop")
    /// or into the configuration document ("routes[3].nexthop"); null when it is about
    /// the request as a whole.
    pub field: Option<String>,
}

impl ApiError {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::Invalid {
            message: message.into(),
            field: field.into(),
        }
    }

    pub fn bad(field: &str, message: impl Into<String>) -> Self {
        ApiError::BadRequest {
            message: message.into(),
            field: Some(field.to_string()),
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Unavailable(_) | ApiError::Busy(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn field(&self) -> Option<&str> {
        match self {
            ApiError::BadRequest { field, .. } | ApiError::Conflict { field, .. } => {
                field.as_deref()
            }
            ApiError::Invalid { field, .. } => Some(field),
            _ => None,
        }
    }

    /// The same error with its field moved under `prefix` (a batch names the change).
    pub fn under(self, prefix: &str) -> Self {
        let join = |f: &str| {
            if f.is_empty() {
                prefix.to_string()
            } else {
                format!("{prefix}.{f}")
            }
        };
        match self {
            ApiError::Invalid { message, field } => ApiError::Invalid {
                message,
                field: join(&field),
            },
            ApiError::BadRequest { message, field } => ApiError::BadRequest {
                message,
                field: Some(join(field.as_deref().unwrap_or(""))),
            },
            ApiError::Conflict { message, field } => ApiError::Conflict {
                message,
                field: Some(join(field.as_deref().unwrap_or(""))),
            },
            e => e,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: self.to_string(),
            field: self.field().map(str::to_string),
        };
        let mut r = (self.status(), axum::Json(body)).into_response();
        if let ApiError::Busy(_) = self {
            r.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(crate::worker::RETRY_AFTER_S),
            );
        }
        if self == ApiError::Unauthorized {
            r.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        r
    }
}
