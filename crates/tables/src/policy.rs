//! Network policy: ordered L3/L4 rules between virtual networks.
//!
//! Evaluated on the slow path only (the verdict is cached in the flow, and the reverse
//! flow of an allowed flow is installed with it: the policy is stateful), so a linear
//! first-match scan of a short ordered list is the right shape: it is what operators
//! read and reason about.

use crate::chain::ChainId;
use crate::ids::VrfId;
use crate::prefix::IpPrefix;
use core::net::IpAddr;
use ovr_wire::ip_proto;

/// What a matching rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PolicyAction {
    Allow,
    Deny,
    /// Allow, through the functions of this service chain.
    Chain(ChainId),
}

/// An inclusive port range; `PortRange::ANY` matches every port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortRange {
    pub first: u16,
    pub last: u16,
}

impl PortRange {
    pub const ANY: PortRange = PortRange {
        first: 0,
        last: u16::MAX,
    };

    pub fn is_any(&self) -> bool {
        *self == Self::ANY
    }

    fn contains(&self, port: u16) -> bool {
        (self.first..=self.last).contains(&port)
    }
}

/// One rule; every `None`/ANY field matches anything.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PolicyRule {
    pub src_net: Option<VrfId>,
    pub dst_net: Option<VrfId>,
    pub src: Option<IpPrefix>,
    pub dst: Option<IpPrefix>,
    pub protocol: Option<u8>,
    /// Port ranges match only TCP and UDP packets unless they are ANY.
    pub src_ports: PortRange,
    pub dst_ports: PortRange,
    pub action: PolicyAction,
}

impl PolicyRule {
    /// A rule matching every packet, to narrow with struct update syntax:
    /// `PolicyRule { protocol: Some(6), ..PolicyRule::matching_all(PolicyAction::Deny) }`.
    pub fn matching_all(action: PolicyAction) -> Self {
        Self {
            src_net: None,
            dst_net: None,
            src: None,
            dst: None,
            protocol: None,
            src_ports: PortRange::ANY,
            dst_ports: PortRange::ANY,
            action,
        }
    }
}

/// Why a rule was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("rule {rule}: port range {first}-{last} is empty")]
    EmptyPortRange { rule: usize, first: u16, last: u16 },
    #[error("rule {rule}: port ranges need protocol tcp (6) or udp (17)")]
    PortsWithoutPortProtocol { rule: usize },
}

/// What a packet looks like to the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyQuery {
    pub src_net: VrfId,
    pub dst_net: VrfId,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: u8,
    pub src_port: u16,
    pub dst_port: u16,
}

/// The verdict and the rule that gave it (`None`: the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub action: PolicyAction,
    pub rule: Option<usize>,
}

/// The ordered rules of one virtual network.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    rules: Vec<PolicyRule>,
}

impl Policy {
    /// A policy from ordered rules, refusing rules that can never match as written.
    pub fn new(rules: Vec<PolicyRule>) -> Result<Self, PolicyError> {
        for (i, r) in rules.iter().enumerate() {
            for p in [r.src_ports, r.dst_ports] {
                if p.first > p.last {
                    return Err(PolicyError::EmptyPortRange {
                        rule: i,
                        first: p.first,
                        last: p.last,
                    });
                }
            }
            let has_ports = matches!(r.protocol, Some(ip_proto::TCP | ip_proto::UDP));
            let any_port = r.src_ports.is_any() && r.dst_ports.is_any();
            if !has_ports && !any_port {
                return Err(PolicyError::PortsWithoutPortProtocol { rule: i });
            }
        }
        Ok(Self { rules })
    }

    pub fn rules(&self) -> &[PolicyRule] {
        &self.rules
    }

    /// First matching rule; with none, traffic within one network is allowed and traffic
    /// between networks is denied.
    pub fn evaluate(&self, q: &PolicyQuery) -> Verdict {
        match self.rules.iter().position(|r| matches(r, q)) {
            Some(i) => Verdict {
                action: self.rules[i].action,
                rule: Some(i),
            },
            None => default_verdict(q),
        }
    }
}

/// The verdict when no policy or no rule applies.
pub fn default_verdict(q: &PolicyQuery) -> Verdict {
    let action = if q.src_net == q.dst_net {
        PolicyAction::Allow
    } else {
        PolicyAction::Deny
    };
    Verdict { action, rule: None }
}

fn matches(r: &PolicyRule, q: &PolicyQuery) -> bool {
    r.src_net.is_none_or(|n| n == q.src_net)
        && r.dst_net.is_none_or(|n| n == q.dst_net)
        && r.src.is_none_or(|p| p.contains(q.src))
        && r.dst.is_none_or(|p| p.contains(q.dst))
        && r.protocol.is_none_or(|p| p == q.protocol)
        && r.src_ports.contains(q.src_port)
        && r.dst_ports.contains(q.dst_port)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(action: PolicyAction) -> PolicyRule {
        PolicyRule::matching_all(action)
    }

    fn query(src_net: u32, dst_net: u32, proto: u8, dport: u16) -> PolicyQuery {
        PolicyQuery {
            src_net: VrfId(src_net),
            dst_net: VrfId(dst_net),
            src: "10.1.0.5".parse().unwrap(),
            dst: "10.2.0.7".parse().unwrap(),
            protocol: proto,
            src_port: 40000,
            dst_port: dport,
        }
    }

    #[test]
    fn default_allows_within_and_denies_between_networks() {
        let p = Policy::default();
        assert_eq!(p.evaluate(&query(1, 1, 6, 80)).action, PolicyAction::Allow);
        assert_eq!(p.evaluate(&query(1, 2, 6, 80)).action, PolicyAction::Deny);
    }

    #[test]
    fn first_match_wins_and_is_reported() {
        let web = PolicyRule {
            dst_net: Some(VrfId(2)),
            dst: Some("10.2.0.0/16".parse().unwrap()),
            protocol: Some(ip_proto::TCP),
            dst_ports: PortRange {
                first: 80,
                last: 443,
            },
            ..rule(PolicyAction::Allow)
        };
        let deny_all = rule(PolicyAction::Deny);
        let p = Policy::new(vec![web, deny_all]).unwrap();
        assert_eq!(
            p.evaluate(&query(1, 2, 6, 443)),
            Verdict {
                action: PolicyAction::Allow,
                rule: Some(0)
            }
        );
        assert_eq!(
            p.evaluate(&query(1, 2, 6, 444)),
            Verdict {
                action: PolicyAction::Deny,
                rule: Some(1)
            }
        );
        assert_eq!(
            p.evaluate(&query(1, 2, 17, 80)),
            Verdict {
                action: PolicyAction::Deny,
                rule: Some(1)
            }
        );
        assert_eq!(p.evaluate(&query(1, 3, 6, 80)).rule, Some(1));
    }

    #[test]
    fn refuses_rules_that_cannot_match() {
        let bad_range = PolicyRule {
            protocol: Some(ip_proto::TCP),
            dst_ports: PortRange {
                first: 90,
                last: 80,
            },
            ..rule(PolicyAction::Allow)
        };
        assert!(matches!(
            Policy::new(vec![bad_range]),
            Err(PolicyError::EmptyPortRange { rule: 0, .. })
        ));
        let icmp_ports = PolicyRule {
            protocol: Some(ip_proto::ICMP),
            dst_ports: PortRange { first: 1, last: 2 },
            ..rule(PolicyAction::Allow)
        };
        assert!(matches!(
            Policy::new(vec![rule(PolicyAction::Deny), icmp_ports]),
            Err(PolicyError::PortsWithoutPortProtocol { rule: 1 })
        ));
    }
}
