//! Packets built by scapy (`fixtures/gen_fixtures.py`), for the tests.

pub const ARP_REPLY: &[u8] = include_bytes!("../fixtures/arp_reply.bin");
pub const ARP_REQUEST: &[u8] = include_bytes!("../fixtures/arp_request.bin");
pub const ETH_DOT1Q: &[u8] = include_bytes!("../fixtures/eth_dot1q.bin");
pub const ETH_IPV4_UDP: &[u8] = include_bytes!("../fixtures/eth_ipv4_udp.bin");
pub const ETH_QINQ: &[u8] = include_bytes!("../fixtures/eth_qinq.bin");
pub const ICMPV4_ECHO: &[u8] = include_bytes!("../fixtures/icmpv4_echo.bin");
pub const ICMPV6_ECHO: &[u8] = include_bytes!("../fixtures/icmpv6_echo.bin");
pub const ICMPV6_NA: &[u8] = include_bytes!("../fixtures/icmpv6_na.bin");
pub const ICMPV6_NS: &[u8] = include_bytes!("../fixtures/icmpv6_ns.bin");
pub const IPV4_FRAG_FIRST: &[u8] = include_bytes!("../fixtures/ipv4_frag_first.bin");
pub const IPV4_FRAG_LATER: &[u8] = include_bytes!("../fixtures/ipv4_frag_later.bin");
pub const IPV4_OPTIONS: &[u8] = include_bytes!("../fixtures/ipv4_options.bin");
pub const IPV4_TCP_OPTIONS: &[u8] = include_bytes!("../fixtures/ipv4_tcp_options.bin");
pub const IPV6_EXT_CHAIN: &[u8] = include_bytes!("../fixtures/ipv6_ext_chain.bin");
pub const IPV6_TCP: &[u8] = include_bytes!("../fixtures/ipv6_tcp.bin");
pub const IPV6_UDP: &[u8] = include_bytes!("../fixtures/ipv6_udp.bin");
pub const MPLS_IN_GRE: &[u8] = include_bytes!("../fixtures/mpls_in_gre.bin");
pub const MPLS_IN_GRE_CSUM_KEY_SEQ: &[u8] =
    include_bytes!("../fixtures/mpls_in_gre_csum_key_seq.bin");
pub const MPLS_IN_UDP: &[u8] = include_bytes!("../fixtures/mpls_in_udp.bin");
pub const VXLAN: &[u8] = include_bytes!("../fixtures/vxlan.bin");
