//! ovr's side of BGP EVPN: the routes it advertises and learns (`evpn`), and GoBGP, the
//! speaker that carries them, driven over its gRPC API (`gobgp`; `api` is generated at
//! build time from the .proto files GoBGP ships). `advertise` computes what a host
//! advertises for its networks and ports; `learnt` keeps what it learns and reads it
//! into remote reachability (flood lists, MACs, host routes, ECMP prefixes); `install`
//! adds that reachability to a host's configuration (tunnels, next hops, entries);
//! `sync` keeps it installed as routes come and go, entry by entry.

pub mod advertise;
pub mod evpn;
pub mod gobgp;
pub mod install;
pub mod learnt;
pub mod pernet;
pub mod sync;

/// GoBGP's API, generated from its own .proto files (build.rs).
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod api {
    tonic::include_proto!("apipb");
}
