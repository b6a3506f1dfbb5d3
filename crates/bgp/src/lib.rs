//! ovr's side of BGP EVPN: the routes it advertises and learns (`evpn`), and GoBGP, the
//! speaker that carries them, driven over its gRPC API (`gobgp`; `api` is generated at
//! build time from the .proto files GoBGP ships).

pub mod evpn;
pub mod gobgp;

/// GoBGP's API, generated from its own .proto files (build.rs).
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod api {
    tonic::include_proto!("apipb");
}
