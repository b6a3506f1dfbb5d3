//! Packet formats for ovr.
//!
//! Every header is a thin view over a byte buffer (`Xxx<T: AsRef<[u8]>>`): getters need
//! `AsRef<[u8]>`, setters `AsMut<[u8]>`, so the type says whether a packet may be written.
//! `Xxx::new_checked` validates the length (and the fields that decide the length) once;
//! after that no getter can panic or read out of bounds. A failure is a [`WireError`],
//! which doubles as the dataplane's drop reason.
//!
//! `XxxRepr` structs are the plain-data form (parse / emit / buffer_len): the control plane,
//! the tests and the builders use them; the hot path reads fields in place.
#![forbid(unsafe_code)]

#[macro_use]
mod view;

pub mod checksum;
pub mod dissect;
pub mod error;
mod field;
#[cfg(test)]
mod fixtures;

pub mod arp;
pub mod ethernet;
pub mod gre;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod mpls;
pub mod offload;
pub mod steer;
pub mod tcp;
pub mod udp;
pub mod vxlan;

pub use error::WireError;

/// IP protocol numbers (IANA "Assigned Internet Protocol Numbers").
pub mod ip_proto {
    pub const HOPOPT: u8 = 0;
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const IPV6_ROUTE: u8 = 43;
    pub const IPV6_FRAG: u8 = 44;
    pub const GRE: u8 = 47;
    pub const ICMPV6: u8 = 58;
    pub const IPV6_NONXT: u8 = 59;
    pub const IPV6_OPTS: u8 = 60;
}

/// Well-known UDP ports of the overlay encapsulations.
pub mod udp_port {
    /// VXLAN, RFC 7348 section 5.
    pub const VXLAN: u16 = 4789;
    /// MPLS-in-UDP, RFC 7510 section 3.
    pub const MPLS_IN_UDP: u16 = 6635;
}
