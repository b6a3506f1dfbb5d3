//! The configuration resources: list, get, create (POST), replace (PUT), delete, for each
//! section of the model; policies per network; the whole configuration; batches.

use super::{AppState, Body};
use crate::change::{Change, Key, Object, PolicyChange};
use crate::error::{ApiError, ErrorBody};
use crate::{Agent, Applied};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use ovr_config::model::*;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The ids the forwarding tables give to names (flows and counters refer to them).
#[derive(Debug, Serialize, ToSchema)]
pub struct Ids {
    pub interfaces: std::collections::BTreeMap<String, u32>,
    pub networks: std::collections::BTreeMap<String, u32>,
    pub nexthops: std::collections::BTreeMap<String, u32>,
}

#[utoipa::path(get, path = "/api/v1/ids", tag = "config",
    responses((status = 200, body = Ids)))]
pub async fn ids(State(s): State<AppState>) -> Result<Json<Ids>, ApiError> {
    s.read(|a| {
        let n = a.names();
        Ids {
            interfaces: n.interfaces.iter().map(|(k, v)| (k.clone(), v.0)).collect(),
            networks: n.networks.iter().map(|(k, v)| (k.clone(), v.0)).collect(),
            nexthops: n.nexthops.iter().map(|(k, v)| (k.clone(), v.0)).collect(),
        }
    })
    .await
    .map(Json)
}

/// Several changes, applied all-or-nothing.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Batch {
    pub changes: Vec<Change>,
}

/// A network's policy.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyBody {
    /// Ordered rules; null: the default (allow within the network, deny between).
    pub rules: Option<Vec<RuleConfig>>,
}

/// A network's policy, with the network.
#[derive(Debug, Serialize, ToSchema)]
pub struct NetworkPolicy {
    pub network: String,
    pub rules: Option<Vec<RuleConfig>>,
}

async fn change(s: AppState, changes: Vec<Change>, batch: bool) -> Result<Json<Applied>, ApiError> {
    s.write(move |a| a.apply(changes, batch)).await.map(Json)
}

/// The key in the body must be the one in the path.
fn same_key(o: &Object, key: &Key) -> Result<(), ApiError> {
    if o.key() == *key {
        Ok(())
    } else {
        Err(ApiError::invalid(
            o.key_field(),
            format!("the body names {}, the path {key}", o.key()),
        ))
    }
}

fn find<T: Clone>(
    a: &Agent,
    key: &Key,
    section: impl Fn(&Config) -> &Vec<T>,
) -> Result<T, ApiError> {
    a.find(key)
        .and_then(|i| section(a.config()).get(i).cloned())
        .ok_or_else(|| ApiError::NotFound(format!("no {key}")))
}

macro_rules! named {
    ($m:ident, $list:tt, $one:tt, $tag:tt, $ty:ty, $variant:ident, $field:ident) => {
        pub mod $m {
            use super::*;

            #[utoipa::path(get, path = $list, tag = $tag,
                        responses((status = 200, body = [$ty])))]
            pub async fn list(State(s): State<AppState>) -> Result<Json<Vec<$ty>>, ApiError> {
                s.read(|a| a.config().$field.clone()).await.map(Json)
            }

            #[utoipa::path(get, path = $one, tag = $tag, params(("name" = String, Path)),
                        responses((status = 200, body = $ty), (status = 404, body = ErrorBody)))]
            pub async fn get(
                State(s): State<AppState>,
                Path(name): Path<String>,
            ) -> Result<Json<$ty>, ApiError> {
                s.read(move |a| find(a, &Key::$variant { name }, |c| &c.$field))
                    .await?
                    .map(Json)
            }

            #[utoipa::path(post, path = $list, tag = $tag, request_body = $ty,
                        responses((status = 201, body = Applied), (status = 400, body = ErrorBody),
                            (status = 409, body = ErrorBody), (status = 413, body = ErrorBody),
                            (status = 422, body = ErrorBody)))]
            pub async fn create(
                State(s): State<AppState>,
                Body(o): Body<$ty>,
            ) -> Result<(StatusCode, Json<Applied>), ApiError> {
                let r = change(s, vec![Change::Create(Object::$variant(o))], false).await?;
                Ok((StatusCode::CREATED, r))
            }

            #[utoipa::path(put, path = $one, tag = $tag, params(("name" = String, Path)),
                        request_body = $ty,
                        responses((status = 200, body = Applied), (status = 400, body = ErrorBody),
                            (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
                            (status = 413, body = ErrorBody), (status = 422, body = ErrorBody)))]
            pub async fn replace(
                State(s): State<AppState>,
                Path(name): Path<String>,
                Body(o): Body<$ty>,
            ) -> Result<Json<Applied>, ApiError> {
                let o = Object::$variant(o);
                same_key(&o, &Key::$variant { name })?;
                change(s, vec![Change::Replace(o)], false).await
            }

            #[utoipa::path(delete, path = $one, tag = $tag, params(("name" = String, Path)),
                        responses((status = 200, body = Applied), (status = 404, body = ErrorBody),
                            (status = 409, body = ErrorBody)))]
            pub async fn delete(
                State(s): State<AppState>,
                Path(name): Path<String>,
            ) -> Result<Json<Applied>, ApiError> {
                change(s, vec![Change::Delete(Key::$variant { name })], false).await
            }
        }
    };
}

named!(
    interfaces,
    "/api/v1/interfaces",
    "/api/v1/interfaces/{name}",
    "interfaces",
    InterfaceConfig,
    Interface,
    interfaces
);
named!(
    networks,
    "/api/v1/networks",
    "/api/v1/networks/{name}",
    "networks",
    NetworkConfig,
    Network,
    networks
);
named!(
    tunnels,
    "/api/v1/tunnels",
    "/api/v1/tunnels/{name}",
    "tunnels",
    TunnelConfig,
    Tunnel,
    tunnels
);
named!(
    nexthops,
    "/api/v1/nexthops",
    "/api/v1/nexthops/{name}",
    "nexthops",
    NextHopConfig,
    Nexthop,
    nexthops
);

/// Parses a path parameter, naming it when it does not parse.
pub(crate) fn param<T: core::str::FromStr>(field: &str, v: &str) -> Result<T, ApiError>
where
    T::Err: core::fmt::Display,
{
    v.parse()
        .map_err(|e| ApiError::bad(field, format!("'{v}': {e}")))
}

fn route_key(network: String, addr: &str, len: &str) -> Result<Key, ApiError> {
    let prefix = param("prefix", &format!("{addr}/{len}"))?;
    Ok(Key::Route { network, prefix })
}

/// Table entries keyed by more than a name: routes, bridge entries, labels.
macro_rules! keyed {
    ($m:ident, $list:tt, $one:tt, $tag:tt, $ty:ty, $variant:ident, $field:ident,
     ($($p:ident),+), $params:tt, $key:expr) => {
        pub mod $m {
            use super::*;

            #[utoipa::path(get, path = $list, tag = $tag, responses((status = 200, body = [$ty])))]
            pub async fn list(State(s): State<AppState>) -> Result<Json<Vec<$ty>>, ApiError> {
                s.read(|a| a.config().$field.clone()).await.map(Json)
            }

            /// The path parameters, as text (parsed by `key`, naming the bad one).
            type P = ($(keyed!(@s $p),)+);

            fn key(($($p,)+): P) -> Result<Key, ApiError> {
                let k: fn($(keyed!(@s $p),)+) -> Result<Key, ApiError> = $key;
                k($($p,)+)
            }

            #[utoipa::path(get, path = $one, tag = $tag, params $params,
                responses((status = 200, body = $ty), (status = 400, body = ErrorBody),
                    (status = 404, body = ErrorBody)))]
            pub async fn get(State(s): State<AppState>, Path(p): Path<P>)
                -> Result<Json<$ty>, ApiError> {
                let k = key(p)?;
                s.read(move |a| find(a, &k, |c| &c.$field)).await?.map(Json)
            }

            #[utoipa::path(post, path = $list, tag = $tag, request_body = $ty,
                responses((status = 201, body = Applied), (status = 400, body = ErrorBody),
                    (status = 409, body = ErrorBody), (status = 413, body = ErrorBody),
                    (status = 422, body = ErrorBody)))]
            pub async fn create(State(s): State<AppState>, Body(o): Body<$ty>)
                -> Result<(StatusCode, Json<Applied>), ApiError> {
                let r = change(s, vec![Change::Create(Object::$variant(o))], false).await?;
                Ok((StatusCode::CREATED, r))
            }

            #[utoipa::path(put, path = $one, tag = $tag, params $params, request_body = $ty,
                responses((status = 200, body = Applied), (status = 400, body = ErrorBody),
                    (status = 404, body = ErrorBody), (status = 413, body = ErrorBody),
                    (status = 422, body = ErrorBody)))]
            pub async fn replace(State(s): State<AppState>, Path(p): Path<P>,
                Body(o): Body<$ty>) -> Result<Json<Applied>, ApiError> {
                let o = Object::$variant(o);
                same_key(&o, &key(p)?)?;
                change(s, vec![Change::Replace(o)], false).await
            }

            #[utoipa::path(delete, path = $one, tag = $tag, params $params,
                responses((status = 200, body = Applied), (status = 400, body = ErrorBody),
                    (status = 404, body = ErrorBody)))]
            pub async fn delete(State(s): State<AppState>, Path(p): Path<P>)
                -> Result<Json<Applied>, ApiError> {
                change(s, vec![Change::Delete(key(p)?)], false).await
            }
        }
    };
    (@s $p:ident) => { String };
}

keyed!(
    routes,
    "/api/v1/routes",
    "/api/v1/routes/{network}/{addr}/{len}",
    "routes",
    RouteConfig,
    Route,
    routes,
    (network, addr, len),
    (
        ("network" = String, Path),
        ("addr" = String, Path, description = "the prefix's address"),
        ("len" = String, Path, description = "the prefix's length")
    ),
    |n, a, l| route_key(n, &a, &l)
);
keyed!(
    bridge,
    "/api/v1/bridge",
    "/api/v1/bridge/{network}/{mac}",
    "bridge",
    BridgeConfig,
    Bridge,
    bridge,
    (network, mac),
    (("network" = String, Path), ("mac" = String, Path)),
    |network, mac| Ok(Key::Bridge {
        network,
        mac: param("mac", &mac)?
    })
);
keyed!(
    labels,
    "/api/v1/labels",
    "/api/v1/labels/{label}",
    "labels",
    LabelConfig,
    Label,
    labels,
    (label),
    (("label" = String, Path)),
    |label| Ok(Key::Label {
        label: param("label", &label)?
    })
);

#[utoipa::path(get, path = "/api/v1/policies", tag = "policies",
    responses((status = 200, body = [NetworkPolicy])))]
pub async fn policies(State(s): State<AppState>) -> Result<Json<Vec<NetworkPolicy>>, ApiError> {
    s.read(|a| {
        a.config()
            .networks
            .iter()
            .map(|n| NetworkPolicy {
                network: n.name.clone(),
                rules: n.policy.clone(),
            })
            .collect()
    })
    .await
    .map(Json)
}

#[utoipa::path(get, path = "/api/v1/policies/{network}", tag = "policies",
    params(("network" = String, Path)),
    responses((status = 200, body = NetworkPolicy), (status = 404, body = ErrorBody)))]
pub async fn policy(
    State(s): State<AppState>,
    Path(network): Path<String>,
) -> Result<Json<NetworkPolicy>, ApiError> {
    s.read(move |a| {
        let n = find(a, &Key::Network { name: network }, |c| &c.networks)?;
        Ok(NetworkPolicy {
            network: n.name,
            rules: n.policy,
        })
    })
    .await?
    .map(Json)
}

#[utoipa::path(put, path = "/api/v1/policies/{network}", tag = "policies",
    params(("network" = String, Path)), request_body = PolicyBody,
    responses((status = 200, body = Applied), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn set_policy(
    State(s): State<AppState>,
    Path(network): Path<String>,
    Body(b): Body<PolicyBody>,
) -> Result<Json<Applied>, ApiError> {
    let c = Change::SetPolicy(PolicyChange {
        network,
        rules: b.rules,
    });
    change(s, vec![c], false).await
}

#[utoipa::path(delete, path = "/api/v1/policies/{network}", tag = "policies",
    params(("network" = String, Path)),
    responses((status = 200, description = "the policy is back to the default", body = Applied),
        (status = 404, body = ErrorBody)))]
pub async fn reset_policy(
    State(s): State<AppState>,
    Path(network): Path<String>,
) -> Result<Json<Applied>, ApiError> {
    let c = Change::SetPolicy(PolicyChange {
        network,
        rules: None,
    });
    change(s, vec![c], false).await
}

#[utoipa::path(post, path = "/api/v1/batch", tag = "config", request_body = Batch,
    responses((status = 200, body = Applied), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn batch(
    State(s): State<AppState>,
    Body(b): Body<Batch>,
) -> Result<Json<Applied>, ApiError> {
    change(s, b.changes, true).await
}

#[utoipa::path(get, path = "/api/v1/config", tag = "config",
    responses((status = 200, description = "the whole desired configuration", body = Config)))]
pub async fn get_config(State(s): State<AppState>) -> Result<Json<Config>, ApiError> {
    s.read(|a| a.config().clone()).await.map(Json)
}

#[utoipa::path(put, path = "/api/v1/config", tag = "config", request_body = Config,
    responses((status = 200, body = Applied), (status = 400, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 413, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn put_config(
    State(s): State<AppState>,
    Body(c): Body<Config>,
) -> Result<Json<Applied>, ApiError> {
    s.write(move |a| a.replace(c)).await.map(Json)
}
