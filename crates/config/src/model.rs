//! The configuration as written: plain serde structs. Values with a syntax of their own
//! (MACs, prefixes, addresses, port ranges) are parsed as the document is read (see
//! `values`); names stay names, resolved during translation.

pub use crate::values::{Address, Mac, Ports, Prefix, Protocol, RouteTarget};
use core::net::IpAddr;
use serde::{Deserialize, Serialize};

/// A whole configuration. Every section is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub interfaces: Vec<InterfaceConfig>,
    #[serde(default)]
    pub networks: Vec<NetworkConfig>,
    #[serde(default)]
    pub tunnels: Vec<TunnelConfig>,
    #[serde(default)]
    pub nexthops: Vec<NextHopConfig>,
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
    #[serde(default)]
    pub bridge: Vec<BridgeConfig>,
    #[serde(default)]
    pub labels: Vec<LabelConfig>,
    #[serde(default)]
    pub flows: FlowSettings,
    /// Network functions that chains steer traffic through.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<ServiceConfig>,
    /// Ordered lists of functions, named by policy rules with `action: chain`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chains: Vec<ChainConfig>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum InterfaceKindConfig {
    Underlay,
    #[default]
    Workload,
    Tap,
    Memif,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct InterfaceConfig {
    pub name: String,
    #[serde(default)]
    pub kind: InterfaceKindConfig,
    /// Required for the underlay; workloads default to their network's gateway MAC.
    pub mac: Option<Mac>,
    /// "address/length"; on the underlay, the local VTEP addresses.
    #[serde(default)]
    pub addresses: Vec<Address>,
    #[serde(default = "default_mtu")]
    pub mtu: u16,
    /// The network of a workload (not of the underlay).
    pub network: Option<String>,
    #[serde(default = "yes")]
    pub policy: bool,
    #[serde(default = "yes")]
    pub admin_up: bool,
    /// The workload's own MAC: gives it a next hop (named after the interface), a bridge
    /// entry, host routes for `peer_addresses` and a place in the flood list.
    pub peer_mac: Option<Mac>,
    /// The workload's addresses: a host route each, to its next hop.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub peer_addresses: Vec<IpAddr>,
    /// A memif interface's connection (required with `kind: memif`; an underlay may
    /// have one, which makes it a memif interface to another switch; refused otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memif: Option<MemifConfig>,
    /// A limit on the packets taken in from this interface (none by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub police: Option<PoliceConfig>,
}

/// A packet-rate policer at an interface's ingress: frames over the rate are dropped
/// (`policed`) as they are read. A workload that sends too fast then costs the
/// forwarding worker and the receive rings it shares with every other network no more
/// than its rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PoliceConfig {
    pub packets_per_second: u32,
    /// Packets let through at once after a quiet spell (default: a tenth of a second's
    /// worth, at least 64).
    pub burst: Option<u32>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum MemifRoleConfig {
    /// Listen on the socket; the network function connects (and offers its memory).
    #[default]
    Server,
    /// Connect to the network function's socket, retrying with backoff.
    Client,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum MemifModeConfig {
    #[default]
    Ethernet,
    /// IP packets without an Ethernet header.
    Ip,
}

/// How a memif interface connects to its network function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MemifConfig {
    #[serde(default)]
    pub role: MemifRoleConfig,
    /// The control socket: an absolute file path, or "@name" (abstract namespace).
    pub socket: String,
    /// The interface id on the socket (several interfaces may share one socket).
    #[serde(default)]
    pub id: u32,
    /// Up to 24 bytes the client must present.
    pub secret: Option<String>,
    #[serde(default)]
    pub mode: MemifModeConfig,
    /// log2 of the ring size (1..14): 10 is 1024 slots.
    #[serde(default = "memif_ring_size")]
    pub ring_size: u8,
    /// Bytes per buffer (a client's; frames larger are chained).
    #[serde(default = "memif_buffer_size")]
    pub buffer_size: u32,
    /// Queue pairs.
    #[serde(default = "memif_queues")]
    pub queues: u16,
}

fn memif_ring_size() -> u8 {
    10
}

fn memif_buffer_size() -> u32 {
    2048
}

fn memif_queues() -> u16 {
    1
}

fn default_mtu() -> u16 {
    1500
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NetworkConfig {
    pub name: String,
    pub vni: Option<u32>,
    /// The virtual gateway's MAC (default `ovr_tables::vrf::DEFAULT_ROUTER_MAC`).
    pub router_mac: Option<Mac>,
    /// Virtual gateway addresses, "address/length".
    #[serde(default)]
    pub gateways: Vec<Address>,
    /// Next hops to replicate broadcast and unknown unicast to (besides the workloads
    /// that have a `peer_mac`).
    #[serde(default)]
    pub flood: Vec<String>,
    /// Ordered rules; absent means the default (allow within, deny between networks).
    pub policy: Option<Vec<RuleConfig>>,
    /// The most flows this network may hold on this host, all workers together
    /// (absent: `flows.network_quota`). A flow refused for it is counted under
    /// `flow_table_full` and in the flow counters' `refused_quota`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_quota: Option<u32>,
    /// The BGP EVPN route targets its routes carry and that it imports (absent: `auto`,
    /// ASN:VNI, both ways).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_targets: Option<RouteTargetsConfig>,
    /// How other hosts send to this network (absent: VXLAN with the VNI). With MPLS, BGP
    /// EVPN advertises the labels of the `labels` table that lead into the network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encap: Option<EncapConfig>,
}

/// A network's route targets: each list replaces the automatic ASN:VNI, which `auto`
/// puts back among others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RouteTargetsConfig {
    /// Routes carrying one of these are the network's (a route target names one network
    /// of a host).
    #[serde(default = "auto_target")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub import: Vec<RouteTarget>,
    /// What the network's routes carry.
    #[serde(default = "auto_target")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub export: Vec<RouteTarget>,
}

fn auto_target() -> Vec<RouteTarget> {
    vec![RouteTarget::Auto]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ActionConfig {
    Allow,
    Deny,
    /// Allow, through the functions of the service chain named by `chain`.
    Chain,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    pub action: ActionConfig,
    pub src_network: Option<String>,
    pub dst_network: Option<String>,
    pub src: Option<Prefix>,
    pub dst: Option<Prefix>,
    /// tcp, udp, icmp, icmpv6, gre or a protocol number.
    pub protocol: Option<Protocol>,
    /// A port or "first-last" (only with protocol tcp or udp).
    pub src_ports: Option<Ports>,
    pub dst_ports: Option<Ports>,
    /// The chain of an `action: chain` rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TunnelConfig {
    pub name: String,
    /// An underlay interface.
    pub underlay: String,
    /// The remote VTEP's address.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub remote: IpAddr,
    /// The outer destination MAC (the underlay neighbour).
    pub remote_mac: Mac,
    /// The local VTEP address; by default the underlay's first address of the family.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub local: Option<IpAddr>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum NextHopKindConfig {
    Interface,
    Tunnel,
    Ecmp,
    Drop,
    Receive,
    Vrf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum EncapConfig {
    Vxlan,
    MplsUdp,
    MplsGre,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum InnerConfig {
    Ethernet,
    Ip,
}

/// One next hop; which fields apply depends on `kind`. One struct rather than an enum
/// tagged by `kind`: serde buffers a tagged enum's fields, losing their paths and line
/// numbers in errors; here a field that does not apply to the kind is refused at its
/// path during translation ("nexthops[2].vni: does not apply to a next hop of kind drop").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NextHopConfig {
    pub name: String,
    pub kind: NextHopKindConfig,
    /// interface: the interface and the destination MAC.
    pub interface: Option<String>,
    pub mac: Option<Mac>,
    /// tunnel: the tunnel, the encapsulation and its VNI or label.
    pub tunnel: Option<String>,
    pub encap: Option<EncapConfig>,
    pub vni: Option<u32>,
    pub label: Option<u32>,
    /// ecmp: the members.
    pub members: Option<Vec<String>>,
    /// vrf: the network to look up in, and what the payload is.
    pub network: Option<String>,
    pub inner: Option<InnerConfig>,
}

impl NextHopConfig {
    /// A next hop of `kind` with every field of the kinds unset, for a program to fill
    /// in the ones its kind takes.
    pub fn new(name: impl Into<String>, kind: NextHopKindConfig) -> Self {
        Self {
            name: name.into(),
            kind,
            interface: None,
            mac: None,
            tunnel: None,
            encap: None,
            vni: None,
            label: None,
            members: None,
            network: None,
            inner: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    pub network: String,
    pub prefix: Prefix,
    pub nexthop: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BridgeConfig {
    pub network: String,
    pub mac: Mac,
    pub nexthop: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LabelConfig {
    pub label: u32,
    pub nexthop: String,
}

/// The dataplane's flow-table settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct FlowSettings {
    /// Flows (each direction counts one).
    pub capacity: usize,
    pub idle_timeout_ms: u64,
    pub denied_idle_timeout_ms: u64,
    /// The most flows one network may hold.
    pub network_quota: Option<u32>,
    /// The most new flows per second from one interface (0: no limit).
    pub setup_rate: u32,
}

impl FlowSettings {
    /// The dataplane's settings for these (buffers and the rest at their defaults).
    pub fn dataplane(&self) -> ovr_dataplane::Settings {
        ovr_dataplane::Settings {
            flow_capacity: self.capacity,
            idle_timeout_ns: self.idle_timeout_ms.saturating_mul(1_000_000),
            denied_idle_timeout_ns: self.denied_idle_timeout_ms.saturating_mul(1_000_000),
            network_quota: self.network_quota,
            setup_rate: Some(self.setup_rate).filter(|r| *r > 0),
            ..ovr_dataplane::Settings::default()
        }
    }
}

impl Default for FlowSettings {
    fn default() -> Self {
        Self {
            capacity: 1 << 20,
            idle_timeout_ms: 60_000,
            denied_idle_timeout_ms: 5_000,
            network_quota: None,
            setup_rate: 200_000,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum ServiceModeConfig {
    /// The function routes between its left and right: ovr sends to its MAC there.
    #[default]
    InNetwork,
    /// A bump in the wire: frames leave it unchanged.
    Transparent,
}

/// What probes a function's instances.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum ProbeKindConfig {
    /// The ports' links only.
    #[default]
    Link,
    /// An ARP request for the instance's address on each side, from the gateway.
    Arp,
    /// An ICMP echo request to the instance's address on each side, from the gateway.
    Icmp,
}

/// A function's health probe: every `interval_ms` to each side of each instance on this
/// host; an instance with a side that leaves `failures` probes in a row unanswered
/// leaves its function's group until a probe is answered again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ProbeConfig {
    #[serde(default)]
    pub kind: ProbeKindConfig,
    #[serde(default = "ProbeConfig::default_interval")]
    pub interval_ms: u32,
    #[serde(default = "ProbeConfig::default_failures")]
    pub failures: u32,
}

impl ProbeConfig {
    /// The shortest and longest time between two probes of a port, in ms.
    pub const INTERVAL_MS: (u32, u32) = (10, 60_000);
    /// The most probes a port may miss in a row before it is down.
    pub const FAILURES_MAX: u32 = 100;

    /// Probes 100 ms apart and 3 missed: a dead instance leaves within 1 s.
    fn default_interval() -> u32 {
        100
    }

    fn default_failures() -> u32 {
        3
    }

    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Its timing within bounds, or the field (`interval_ms`, `failures`) and why not:
    /// checked alike in a host's configuration and in a cluster's intent.
    pub fn check_timing(&self) -> Result<(), (&'static str, String)> {
        let (lo, hi) = Self::INTERVAL_MS;
        if !(lo..=hi).contains(&self.interval_ms) {
            return Err((
                "interval_ms",
                format!("{} is out of range: {lo} to {hi} ms", self.interval_ms),
            ));
        }
        if !(1..=Self::FAILURES_MAX).contains(&self.failures) {
            return Err((
                "failures",
                format!(
                    "{} is out of range: 1 to {} probes missed in a row",
                    self.failures,
                    Self::FAILURES_MAX
                ),
            ));
        }
        Ok(())
    }
}

impl Default for ProbeConfig {
    fn default() -> Self {
        Self {
            kind: ProbeKindConfig::Link,
            interval_ms: Self::default_interval(),
            failures: Self::default_failures(),
        }
    }
}

/// A network function and its instances.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ServiceConfig {
    pub name: String,
    #[serde(default)]
    pub mode: ServiceModeConfig,
    /// How its instances' health is checked besides their ports' links (default: the
    /// links only).
    #[serde(default, skip_serializing_if = "ProbeConfig::is_default")]
    pub probe: ProbeConfig,
    /// The instances: ECMP members, each session pinned to one in both directions.
    #[serde(default)]
    pub instances: Vec<ServiceInstanceConfig>,
}

/// One instance of a function: its left port (towards the chain's source network) and
/// its right port (towards the destination).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ServiceInstanceConfig {
    pub name: String,
    pub left: ServicePortConfig,
    pub right: ServicePortConfig,
}

/// A side of an instance: an interface of this host (listed under `interfaces`, with
/// the network that answers the function's ARP for its gateway) and what is behind it;
/// or, for an instance on another host, `via` a VXLAN tunnel next hop to that host in
/// the port's network (the frame is addressed to `mac` inside, and that host bridges it
/// to the port).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ServicePortConfig {
    /// The port's interface on this host (empty with `via`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub interface: String,
    /// The instance is on another host: the tunnel next hop that reaches it there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// In-network: the function's MAC on this side, where ovr sends (required;
    /// transparent functions have none).
    pub mac: Option<Mac>,
    /// In-network: the function's address on this side (shown by `ovrctl chains`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub address: Option<IpAddr>,
}

/// An ordered list of functions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ChainConfig {
    pub name: String,
    /// Names of `services`, in the order traffic from the source network crosses them.
    pub functions: Vec<String>,
}
