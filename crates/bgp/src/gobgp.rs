//! GoBGP as ovr's BGP speaker, driven over its gRPC API: ovr configures it (global
//! settings, peers), hands it the routes to advertise and watches what it learns. BGP
//! itself (sessions, timers, best path, the wire format) stays GoBGP's.
//!
//! `encode` (here) and `decode` (`decode.rs`) translate between `evpn::Route` and
//! GoBGP's `Path`.

use crate::api;
use crate::api::gobgp_api_client::GobgpApiClient;
use crate::evpn::{Encap, Nlri, Rd, Route, RouteKey};
use core::net::{IpAddr, Ipv4Addr};
use decode::{decode_withdrawn, evpn_nlri};
use prost::Name;
use prost_types::Any;
use tokio_stream::StreamExt;
use tonic::transport::Channel;

/// Why a request to GoBGP failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BgpError {
    #[error("gobgpd at {url}: {message}")]
    Unavailable { url: String, message: String },
    #[error("gobgpd refused {what}: {message}")]
    Refused { what: &'static str, message: String },
}

/// Why a learnt route is not used: a name for counting, and the detail for the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {detail}")]
pub struct Refusal {
    pub reason: &'static str,
    pub detail: String,
}

fn refuse<T>(reason: &'static str, detail: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal {
        reason,
        detail: detail.into(),
    })
}

/// What GoBGP said about one path, from which neighbor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Learnt {
    /// The route announced or withdrawn; why it is not used if it is refused.
    pub change: Result<Change, Refusal>,
    /// The neighbor it came from (empty: GoBGP's own, i.e. one ovr added).
    pub neighbor: String,
}

/// A route announced (new, or replacing the one of its key), or withdrawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Announced(Route),
    /// A withdrawal names its route by key: its attributes are not read (they are most
    /// of a path's bytes, and a withdrawal stands whatever they say).
    Withdrawn(RouteKey),
}

impl Learnt {
    /// The route announced (None: withdrawn, or refused).
    pub fn route(&self) -> Option<&Route> {
        match &self.change {
            Ok(Change::Announced(r)) => Some(r),
            _ => None,
        }
    }

    /// The key of the route announced or withdrawn (None: refused).
    pub fn key(&self) -> Option<RouteKey> {
        match &self.change {
            Ok(Change::Announced(r)) => Some(r.nlri.key()),
            Ok(Change::Withdrawn(k)) => Some(*k),
            Err(_) => None,
        }
    }

    pub fn is_withdrawn(&self) -> bool {
        matches!(self.change, Ok(Change::Withdrawn(_)))
    }
}

fn evpn_family() -> api::Family {
    api::Family {
        afi: api::family::Afi::L2vpn as i32,
        safi: api::family::Safi::Evpn as i32,
    }
}

fn any<T: Name>(m: &T) -> Any {
    // Encoding into a Vec cannot fail.
    Any::from_msg(m).unwrap_or_default()
}

fn rd_any(rd: Rd) -> Any {
    match rd {
        Rd::Ip { router, assigned } => any(&api::RouteDistinguisherIpAddress {
            admin: router.to_string(),
            assigned: u32::from(assigned),
        }),
        Rd::As2 { asn, assigned } => any(&api::RouteDistinguisherTwoOctetAsn {
            admin: u32::from(asn),
            assigned,
        }),
        Rd::As4 { asn, assigned } => any(&api::RouteDistinguisherFourOctetAsn {
            admin: asn,
            assigned: u32::from(assigned),
        }),
    }
}

fn nlri_any(n: &Nlri, encap: Encap) -> Any {
    match n {
        Nlri::Imet {
            rd,
            tag,
            originator,
        } => any(&api::EvpnInclusiveMulticastEthernetTagRoute {
            rd: Some(rd_any(*rd)),
            ethernet_tag: *tag,
            ip_address: originator.to_string(),
        }),
        Nlri::MacIp {
            rd,
            tag,
            mac,
            ip,
            label,
            routed,
        } => any(&api::EvpnmacipAdvertisementRoute {
            rd: Some(rd_any(*rd)),
            esi: Some(api::EthernetSegmentIdentifier {
                r#type: 0,
                value: vec![0; 9],
            }),
            ethernet_tag: *tag,
            mac_address: mac.to_string(),
            ip_address: ip.map(|a| a.to_string()).unwrap_or_default(),
            labels: core::iter::once(label)
                .chain(routed)
                .map(|l| encap.label_field(*l))
                .collect(),
        }),
        Nlri::Prefix {
            rd,
            tag,
            addr,
            len,
            gateway,
            label,
        } => any(&api::EvpnipPrefixRoute {
            rd: Some(rd_any(*rd)),
            esi: Some(api::EthernetSegmentIdentifier {
                r#type: 0,
                value: vec![0; 9],
            }),
            ethernet_tag: *tag,
            ip_prefix: addr.to_string(),
            ip_prefix_len: u32::from(*len),
            gw_address: gateway.to_string(),
            label: encap.label_field(*label),
        }),
    }
}

/// The path GoBGP advertises for `r` (or withdraws, with `is_withdraw`).
pub fn encode(r: &Route) -> api::Path {
    let nlri = nlri_any(&r.nlri, r.encap);
    let mut communities: Vec<Any> = r
        .targets
        .iter()
        .map(|t| {
            any(&api::TwoOctetAsSpecificExtended {
                is_transitive: true,
                sub_type: 2,
                asn: u32::from(t.asn),
                local_admin: t.value,
            })
        })
        .collect();
    communities.push(any(&api::EncapExtended {
        tunnel_type: r.encap.tunnel_type(),
    }));
    if let Some(m) = r.router_mac {
        communities.push(any(&api::RouterMacExtended { mac: m.to_string() }));
    }
    if let Some(seq) = r.mobility {
        communities.push(any(&api::MacMobilityExtended {
            is_sticky: false,
            sequence_num: seq,
        }));
    }
    let mut pattrs = vec![
        any(&api::OriginAttribute { origin: 0 }),
        any(&api::MpReachNlriAttribute {
            family: Some(evpn_family()),
            next_hops: vec![r.next_hop.to_string()],
            nlris: vec![nlri.clone()],
        }),
        any(&api::ExtendedCommunitiesAttribute { communities }),
    ];
    if let Some((label, endpoint)) = r.pmsi {
        pattrs.push(any(&api::PmsiTunnelAttribute {
            flags: 0,
            r#type: 6,
            // GoBGP writes the 3 octets as given: an MPLS label in the high 20 bits, as
            // in the NLRI (RFC 7432 section 11.2).
            label: r.encap.label_field(label),
            id: endpoint.octets().to_vec(),
        }));
    }
    api::Path {
        nlri: Some(nlri),
        pattrs,
        family: Some(evpn_family()),
        ..api::Path::default()
    }
}

/// A BGP neighbor as GoBGP reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbor {
    pub address: String,
    pub asn: u32,
    /// "established", "active", "idle", ...
    pub state: String,
    pub received: u64,
    pub advertised: u64,
}

/// How ovr starts GoBGP's BGP side.
#[derive(Debug, Clone)]
pub struct Global {
    pub asn: u32,
    pub router_id: Ipv4Addr,
    /// The TCP port BGP listens on (179; tests use their own; -1: do not listen).
    pub listen_port: i32,
    pub listen_addresses: Vec<String>,
}

/// A peer of ovr's speaker.
#[derive(Debug, Clone)]
pub struct Peer {
    pub address: IpAddr,
    pub asn: u32,
    /// The peer's BGP port (179 unless a test says).
    pub port: u16,
    /// The address ovr's side connects from.
    pub local_address: Option<IpAddr>,
    /// This speaker reflects routes to that peer (the peer is its client).
    pub reflector_client: bool,
}

/// A gobgpd's API.
#[derive(Clone)]
pub struct GoBgp {
    url: String,
    channel: Channel,
}

impl GoBgp {
    /// Connects to gobgpd's API (`http://127.0.0.1:50051`).
    pub async fn connect(url: &str) -> Result<Self, BgpError> {
        let unavailable = |e: &dyn std::fmt::Display| BgpError::Unavailable {
            url: url.to_string(),
            message: e.to_string(),
        };
        let channel = Channel::from_shared(url.to_string())
            .map_err(|e| unavailable(&e))?
            .connect_timeout(std::time::Duration::from_secs(2))
            .connect()
            .await
            .map_err(|e| unavailable(&e))?;
        Ok(Self {
            url: url.to_string(),
            channel,
        })
    }

    /// The generated client (over the one channel: a clone per request, as tonic wants).
    fn client(&self) -> GobgpApiClient<Channel> {
        GobgpApiClient::new(self.channel.clone())
    }

    fn failed(&self, what: &'static str) -> impl Fn(tonic::Status) -> BgpError + '_ {
        move |s| match s.code() {
            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded => BgpError::Unavailable {
                url: self.url.clone(),
                message: s.message().to_string(),
            },
            _ => BgpError::Refused {
                what,
                message: s.message().to_string(),
            },
        }
    }

    /// Starts BGP with ovr's settings, EVPN only.
    pub async fn start(&self, g: &Global) -> Result<(), BgpError> {
        let global = api::Global {
            asn: g.asn,
            router_id: g.router_id.to_string(),
            listen_port: g.listen_port,
            listen_addresses: g.listen_addresses.clone(),
            ..api::Global::default()
        };
        self.client()
            .start_bgp(api::StartBgpRequest {
                global: Some(global),
            })
            .await
            .map_err(self.failed("start"))?;
        Ok(())
    }

    /// Whether gobgpd runs BGP (it was started, by us or an earlier ovrd): one that
    /// restarted is not, until configured again. A small request, unlike a listing.
    pub async fn started(&self) -> Result<bool, BgpError> {
        let r = self
            .client()
            .get_bgp(api::GetBgpRequest {})
            .await
            .map_err(self.failed("a look at its settings"))?
            .into_inner();
        Ok(r.global.is_some_and(|g| g.asn != 0))
    }

    /// Adds a peer for the EVPN family.
    pub async fn add_peer(&self, p: &Peer) -> Result<(), BgpError> {
        let peer = api::Peer {
            conf: Some(api::PeerConf {
                neighbor_address: p.address.to_string(),
                peer_asn: p.asn,
                ..api::PeerConf::default()
            }),
            transport: Some(api::Transport {
                remote_port: u32::from(p.port),
                local_address: p.local_address.map(|a| a.to_string()).unwrap_or_default(),
                ..api::Transport::default()
            }),
            route_reflector: p.reflector_client.then(|| api::RouteReflector {
                route_reflector_client: true,
                ..api::RouteReflector::default()
            }),
            timers: Some(api::Timers {
                config: Some(api::TimersConfig {
                    connect_retry: 1,
                    hold_time: 9,
                    keepalive_interval: 3,
                    ..api::TimersConfig::default()
                }),
                ..api::Timers::default()
            }),
            afi_safis: vec![api::AfiSafi {
                config: Some(api::AfiSafiConfig {
                    family: Some(evpn_family()),
                    enabled: true,
                }),
                ..api::AfiSafi::default()
            }],
            ..api::Peer::default()
        };
        self.client()
            .add_peer(api::AddPeerRequest { peer: Some(peer) })
            .await
            .map_err(self.failed("a peer"))?;
        Ok(())
    }

    /// Advertises a route (replacing the one with the same NLRI).
    pub async fn announce(&self, r: &Route) -> Result<(), BgpError> {
        self.client()
            .add_path(api::AddPathRequest {
                table_type: api::TableType::Global as i32,
                path: Some(encode(r)),
                ..api::AddPathRequest::default()
            })
            .await
            .map_err(self.failed("a route"))?;
        Ok(())
    }

    /// Withdraws a route ovr advertised.
    pub async fn withdraw(&self, r: &Route) -> Result<(), BgpError> {
        self.client()
            .delete_path(api::DeletePathRequest {
                table_type: api::TableType::Global as i32,
                family: Some(evpn_family()),
                path: Some(encode(r)),
                ..api::DeletePathRequest::default()
            })
            .await
            .map_err(self.failed("a withdrawal"))?;
        Ok(())
    }

    /// The best EVPN paths GoBGP holds now (ovr's own and learnt).
    pub async fn routes(&self) -> Result<Vec<Learnt>, BgpError> {
        let mut s = self
            .client()
            .list_path(api::ListPathRequest {
                table_type: api::TableType::Global as i32,
                family: Some(evpn_family()),
                ..api::ListPathRequest::default()
            })
            .await
            .map_err(self.failed("a listing"))?
            .into_inner();
        let mut out = Vec::new();
        let mut n = 0u32;
        while let Some(r) = s.next().await {
            let d = r.map_err(self.failed("a listing"))?;
            for p in d.destination.into_iter().flat_map(|d| d.paths) {
                if p.best {
                    out.push(learnt(p));
                }
            }
            // The answers of a large table come faster than they are decoded (tens of
            // microseconds a path): let the tasks sharing the thread in between.
            n += 1;
            if n.is_multiple_of(64) {
                tokio::task::yield_now().await;
            }
        }
        Ok(out)
    }

    /// Every change of the best paths from now on, after the current ones (`init`). The
    /// stream's first answer comes with the first event (gRPC sends headers lazily):
    /// await it off any path that cannot wait.
    pub async fn watch(
        &self,
    ) -> Result<impl tokio_stream::Stream<Item = Result<Vec<Learnt>, BgpError>> + use<>, BgpError>
    {
        use api::watch_event_request::{Table, table::Filter, table::filter::Type};
        let req = api::WatchEventRequest {
            table: Some(Table {
                filters: vec![Filter {
                    r#type: Type::Best as i32,
                    init: true,
                }],
            }),
            ..api::WatchEventRequest::default()
        };
        // Through `watch::WatchCodec`: the answers' paths read in place.
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        grpc.ready().await.map_err(|e| BgpError::Unavailable {
            url: self.url.clone(),
            message: e.to_string(),
        })?;
        let method =
            tonic::codegen::http::uri::PathAndQuery::from_static("/apipb.GobgpApi/WatchEvent");
        let s = grpc
            .server_streaming(tonic::Request::new(req), method, watch::WatchCodec)
            .await
            .map_err(self.failed("a watch"))?
            .into_inner();
        let url = self.url.clone();
        Ok(s.map(move |e| {
            e.map_err(|s| BgpError::Unavailable {
                url: url.clone(),
                message: s.message().to_string(),
            })
        }))
    }

    /// The neighbors and their sessions.
    pub async fn neighbors(&self) -> Result<Vec<Neighbor>, BgpError> {
        let mut s = self
            .client()
            .list_peer(api::ListPeerRequest::default())
            .await
            .map_err(self.failed("a listing"))?
            .into_inner();
        let mut out = Vec::new();
        while let Some(r) = s.next().await {
            let Some(p) = r.map_err(self.failed("a listing"))?.peer else {
                continue;
            };
            let conf = p.conf.unwrap_or_default();
            let state = p.state.unwrap_or_default();
            let (mut received, mut advertised) = (0, 0);
            for a in &p.afi_safis {
                if let Some(st) = &a.state {
                    received += st.received;
                    advertised += st.advertised;
                }
            }
            let session = api::peer_state::SessionState::try_from(state.session_state)
                .map_or("unknown".to_string(), |s| {
                    s.as_str_name().to_ascii_lowercase()
                });
            out.push(Neighbor {
                address: conf.neighbor_address,
                asn: conf.peer_asn,
                state: session,
                received,
                advertised,
            });
        }
        Ok(out)
    }
}

fn learnt(p: api::Path) -> Learnt {
    let change = if p.is_withdraw {
        evpn_nlri(&p).and_then(decode_withdrawn)
    } else {
        decode(&p).map(Change::Announced)
    };
    Learnt {
        change,
        neighbor: neighbor_of(&p.neighbor_ip).to_string(),
    }
}

/// The neighbor a path came from, empty for GoBGP's own paths (which it names "<nil>",
/// or leaves empty).
fn neighbor_of(ip: &str) -> &str {
    if ip == "<nil>" { "" } else { ip }
}

mod decode;
mod fields;
mod watch;

pub use decode::decode;

#[cfg(test)]
mod tests;
