//! The result of ADD (and what IPAM plugins return, and what prevResult holds), in the
//! specification's shape: interfaces with their `sandbox`, addresses with the index of
//! their interface, routes.

use core::net::IpAddr;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CniResult {
    #[serde(default)]
    pub cni_version: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<Interface>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<IpConfig>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
    #[serde(default, skip_serializing_if = "is_empty")]
    pub dns: Value,
}

fn is_empty(v: &Value) -> bool {
    v.is_null() || v.as_object().is_some_and(|o| o.is_empty())
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Interface {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mac: String,
    /// 1.1.0 and later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// The namespace the interface is in (absent: the host's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IpConfig {
    /// 0.4.0 only: "4" or "6".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// With its prefix length: "10.1.0.5/24".
    pub address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<IpAddr>,
    /// The index of its interface in `interfaces`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<usize>,
}

impl IpConfig {
    /// The address and its prefix length.
    pub fn parts(&self) -> Option<(IpAddr, u8)> {
        let (a, l) = self.address.split_once('/')?;
        let a: IpAddr = a.parse().ok()?;
        let l: u8 = l.parse().ok()?;
        (l <= if a.is_ipv4() { 32 } else { 128 }).then_some((a, l))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Route {
    /// "0.0.0.0/0".
    pub dst: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gw: Option<IpAddr>,
}

impl Route {
    pub fn parts(&self) -> Option<(IpAddr, u8)> {
        IpConfig {
            version: None,
            address: self.dst.clone(),
            gateway: None,
            interface: None,
        }
        .parts()
    }
}

impl CniResult {
    /// The result as `version` prints it: 0.4.0 names each address's IP version and
    /// knows no MTU.
    pub fn for_version(mut self, version: &str) -> Self {
        self.cni_version = version.to_string();
        let old = version == "0.4.0";
        for ip in &mut self.ips {
            ip.version = old.then(|| {
                match ip.parts() {
                    Some((IpAddr::V6(_), _)) => "6",
                    _ => "4",
                }
                .to_string()
            });
        }
        if version != "1.1.0" {
            for i in &mut self.interfaces {
                i.mtu = None;
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> CniResult {
        CniResult {
            cni_version: String::new(),
            interfaces: vec![Interface {
                name: "eth0".into(),
                mac: "02:00:00:00:00:09".into(),
                mtu: Some(1450),
                sandbox: Some("/var/run/netns/a".into()),
            }],
            ips: vec![IpConfig {
                version: None,
                address: "10.1.0.9/24".into(),
                gateway: Some("10.1.0.1".parse().unwrap()),
                interface: Some(0),
            }],
            routes: vec![Route {
                dst: "0.0.0.0/0".into(),
                gw: Some("10.1.0.1".parse().unwrap()),
            }],
            dns: Value::Null,
        }
    }

    #[test]
    fn the_result_has_the_specs_shape_in_each_version() {
        let v = serde_json::to_value(sample().for_version("1.0.0")).unwrap();
        assert_eq!(
            v,
            json!({"cniVersion": "1.0.0",
                "interfaces": [{"name": "eth0", "mac": "02:00:00:00:00:09", "sandbox": "/var/run/netns/a"}],
                "ips": [{"address": "10.1.0.9/24", "gateway": "10.1.0.1", "interface": 0}],
                "routes": [{"dst": "0.0.0.0/0", "gw": "10.1.0.1"}]})
        );
        let v = serde_json::to_value(sample().for_version("1.1.0")).unwrap();
        assert_eq!(v["interfaces"][0]["mtu"], 1450);
        let v = serde_json::to_value(sample().for_version("0.4.0")).unwrap();
        assert_eq!(v["ips"][0]["version"], "4");
        assert!(v["interfaces"][0].get("mtu").is_none());
    }

    #[test]
    fn an_ipam_result_reads_with_fields_we_do_not_use() {
        let r: CniResult = serde_json::from_value(json!({
            "cniVersion": "0.4.0",
            "ips": [{"version": "4", "address": "10.9.0.2/24", "gateway": "10.9.0.1"}],
            "routes": [{"dst": "0.0.0.0/0"}], "dns": {"nameservers": ["1.1.1.1"]}}))
        .unwrap();
        assert_eq!(r.ips[0].parts(), Some(("10.9.0.2".parse().unwrap(), 24)));
        assert_eq!(r.routes[0].parts(), Some(("0.0.0.0".parse().unwrap(), 0)));
        assert_eq!(r.dns["nameservers"][0], "1.1.1.1");
        let bad = IpConfig {
            version: None,
            address: "10.9.0.2/33".into(),
            gateway: None,
            interface: None,
        };
        assert_eq!(bad.parts(), None);
    }
}
