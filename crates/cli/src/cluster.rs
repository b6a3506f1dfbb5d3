//! `ovrctl cluster`: the cluster's intent in etcd (networks, ports, policies: list, add,
//! show, del) and what the agents publish there (hosts, their reports), read and written
//! straight in etcd (docs/cluster.md). Every value written is checked first as the
//! agents check it, and `add` creates only (an etcd transaction) unless `--replace`.

mod intent;
mod report;

use crate::api::{Failure, exit, print_as, show};
use clap::{Args, Subcommand};
use intent::{Intent, NetworkArgs, PolicyArgs, PortArgs};
use ovr_cluster::etcd::{Endpoints, Etcd};
use ovr_cluster::keys::{Key, PREFIX};
use ovr_cluster::model;
use ovr_cluster::store::{Kv, Store, StoreError};
use serde_json::{Map, Value, json};
use std::path::PathBuf;

/// The etcd client URLs when neither --etcd nor $OVR_ETCD says.
const DEFAULT_ETCD: &str = "http://127.0.0.1:2379";

/// How to reach etcd.
#[derive(Args, Clone, Debug)]
pub struct EtcdArgs {
    /// etcd's client URLs, comma-separated [default: $OVR_ETCD, else http://127.0.0.1:2379].
    #[arg(long, global = true, value_delimiter = ',')]
    etcd: Vec<String>,
    /// The CA that signed etcd's certificates (PEM), for https:// URLs.
    #[arg(long, global = true)]
    etcd_ca: Option<PathBuf>,
    /// This client's certificate (PEM), for an etcd that requires client certificates.
    #[arg(long, global = true, requires = "etcd_key")]
    etcd_cert: Option<PathBuf>,
    /// The key of --etcd-cert (PEM).
    #[arg(long, global = true, requires = "etcd_cert")]
    etcd_key: Option<PathBuf>,
}

impl EtcdArgs {
    fn endpoints(&self) -> Endpoints {
        let urls = if self.etcd.is_empty() {
            let env = std::env::var("OVR_ETCD").unwrap_or_default();
            let from_env: Vec<String> = env
                .split(',')
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .map(str::to_string)
                .collect();
            if from_env.is_empty() {
                vec![DEFAULT_ETCD.to_string()]
            } else {
                from_env
            }
        } else {
            self.etcd.clone()
        };
        Endpoints {
            urls,
            ca: self.etcd_ca.clone(),
            cert: self.etcd_cert.clone(),
            key: self.etcd_key.clone(),
        }
    }
}

#[derive(Subcommand, Clone, Debug)]
pub enum Cluster {
    /// etcd's endpoints and revision, how many objects of each kind, the keys hosts
    /// rejected and the keys whose value is not valid.
    Status,
    /// Hosts: alive (their leased key exists), vtep, version, the revision they applied
    /// and how far behind it is, how many keys they rejected.
    Hosts,
    /// Virtual networks.
    Networks {
        #[command(subcommand)]
        action: Option<Networks>,
    },
    /// Workloads' ports, by host.
    Ports {
        #[command(subcommand)]
        action: Option<Ports>,
    },
    /// Rules for a network's traffic.
    Policies {
        #[command(subcommand)]
        action: Option<Policies>,
    },
}

#[derive(Subcommand, Clone, Debug)]
pub enum Networks {
    /// All of them (the default).
    List,
    /// Create one: networks add red --vni 100 --subnet 10.1.0.0/24 --gateway 10.1.0.1/24.
    Add(NetworkArgs),
    Show {
        name: String,
    },
    Del {
        name: String,
    },
}

#[derive(Subcommand, Clone, Debug)]
pub enum Ports {
    /// All of them, or one host's (the default).
    List {
        #[arg(long)]
        host: Option<String>,
    },
    /// Create one: ports add --host h1 web-1 --network red --mac 02:00:00:00:00:01
    /// --ip 10.1.0.5 --interface veth-w1.
    Add(PortArgs),
    Show {
        #[arg(long)]
        host: String,
        name: String,
    },
    Del {
        #[arg(long)]
        host: String,
        name: String,
    },
}

#[derive(Subcommand, Clone, Debug)]
pub enum Policies {
    /// All of them (the default).
    List,
    /// Create one: policies add no-telnet --network red
    /// --rules '[{"action":"deny","protocol":"tcp","dst_ports":"23"}]'.
    Add(PolicyArgs),
    Show {
        name: String,
    },
    Del {
        name: String,
    },
}

/// Runs one `cluster` command against etcd.
pub fn run(etcd: &EtcdArgs, what: Cluster, json: bool) -> Result<(), Failure> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the etcd client: {e}"))?;
    rt.block_on(async {
        let endpoints = etcd.endpoints();
        let db = Etcd::connect(&endpoints)
            .await
            .map_err(|e| etcd_failed(&endpoints, &e))?;
        let c = Ctx {
            db,
            endpoints,
            json,
        };
        c.run(what).await
    })
}

/// A failed request, with where etcd was looked for.
fn etcd_failed(e: &Endpoints, err: &StoreError) -> Failure {
    let why = match err {
        StoreError::Unavailable(m) => m.clone(),
        other => other.to_string(),
    };
    Failure::from(format!("etcd at {}: {why}", e.urls.join(",")))
}

/// What every command needs: the store, where it is, and how to print.
struct Ctx {
    db: Etcd,
    endpoints: Endpoints,
    json: bool,
}

/// The columns of each kind's table (other fields go to "details").
const NETWORK_COLUMNS: &[&str] = &["name", "vni", "encap", "flood", "subnets", "gateways"];
const PORT_COLUMNS: &[&str] = &["host", "name", "network", "mac", "ips", "interface"];
const POLICY_COLUMNS: &[&str] = &["name", "network", "rules"];

impl Ctx {
    async fn run(&self, what: Cluster) -> Result<(), Failure> {
        match what {
            Cluster::Status => report::status(self).await,
            Cluster::Hosts => report::hosts(self).await,
            Cluster::Networks { action } => match action.unwrap_or(Networks::List) {
                Networks::List => {
                    self.list(&format!("{PREFIX}networks/"), NETWORK_COLUMNS)
                        .await
                }
                Networks::Add(a) => self.write(intent::network(&a)).await,
                Networks::Show { name } => self.show(Key::Network(name)).await,
                Networks::Del { name } => self.delete(Key::Network(name)).await,
            },
            Cluster::Ports { action } => match action.unwrap_or(Ports::List { host: None }) {
                Ports::List { host } => {
                    let under = host.map(|h| format!("{h}/")).unwrap_or_default();
                    self.list(&format!("{PREFIX}ports/{under}"), PORT_COLUMNS)
                        .await
                }
                Ports::Add(a) => self.write(intent::port(&a).map_err(Failure::usage)?).await,
                Ports::Show { host, name } => self.show(Key::Port { host, name }).await,
                Ports::Del { host, name } => self.delete(Key::Port { host, name }).await,
            },
            Cluster::Policies { action } => match action.unwrap_or(Policies::List) {
                Policies::List => {
                    self.list(&format!("{PREFIX}policies/"), POLICY_COLUMNS)
                        .await
                }
                Policies::Add(a) => {
                    self.write(intent::policy(&a).map_err(Failure::usage)?)
                        .await
                }
                Policies::Show { name } => self.show(Key::Policy(name)).await,
                Policies::Del { name } => self.delete(Key::Policy(name)).await,
            },
        }
    }

    /// Every key under `prefix`, as it was at one revision.
    async fn kvs(&self, prefix: &str) -> Result<(i64, Vec<Kv>), Failure> {
        let s = self
            .db
            .list(prefix)
            .await
            .map_err(|e| etcd_failed(&self.endpoints, &e))?;
        Ok((s.revision, s.kvs))
    }

    fn print(&self, v: &Value, human: impl FnOnce(&Value)) {
        print_as(self.json, v, human);
    }

    async fn list(&self, prefix: &str, columns: &[&str]) -> Result<(), Failure> {
        let (_, kvs) = self.kvs(prefix).await?;
        let v = Value::Array(kvs.iter().map(object).collect());
        self.print(&v, |v| show::table(columns, v));
        Ok(())
    }

    async fn show(&self, key: Key) -> Result<(), Failure> {
        let k = key.to_string();
        let (_, kvs) = self.kvs(&k).await?;
        let kv = kvs.iter().find(|kv| kv.key == k).ok_or_else(|| Failure {
            status: exit::NOT_FOUND,
            message: format!("not found: {k}"),
        })?;
        self.print(&object(kv), show::object);
        Ok(())
    }

    /// Writes a checked value: created unless it exists, or replaced with `--replace`.
    async fn write(&self, i: Intent) -> Result<(), Failure> {
        let (key, bytes) = i
            .checked()
            .map_err(|e| Failure::from(format!("refused, nothing written: {e}")))?;
        let written = if i.replace {
            self.db.replace(&key, bytes).await.map(Some)
        } else {
            self.db.create(&key, bytes).await
        };
        let revision = written
            .map_err(|e| etcd_failed(&self.endpoints, &e))?
            .ok_or_else(|| format!("{key} exists: nothing written (--replace overwrites it)"))?;
        let v = json!({ "key": key, "revision": revision, "value": i.value });
        self.print(&v, |_| println!("{key} written (revision {revision})"));
        Ok(())
    }

    async fn delete(&self, key: Key) -> Result<(), Failure> {
        let k = key.to_string();
        let revision = self
            .db
            .remove(&k)
            .await
            .map_err(|e| etcd_failed(&self.endpoints, &e))?
            .ok_or_else(|| Failure {
                status: exit::NOT_FOUND,
                message: format!("not found: {k}"),
            })?;
        let v = json!({ "key": k, "revision": revision });
        self.print(&v, |_| println!("{k} deleted (revision {revision})"));
        Ok(())
    }
}

/// A key and its value as one object: the names in the key ("name", and "host" for
/// ports and endpoints), the value's fields as stored, and "error" when the value (or
/// the key) is one the agents refuse.
fn object(kv: &Kv) -> Value {
    let mut o = Map::new();
    match serde_json::from_slice(&kv.value) {
        Ok(Value::Object(fields)) => o.extend(fields),
        // Not an object: shown as the text it is.
        _ => {
            o.insert("value".into(), String::from_utf8_lossy(&kv.value).into());
        }
    }
    let checked = Key::parse(&kv.key).and_then(|k| {
        match &k {
            Key::Network(n) | Key::Policy(n) | Key::Host(n) => {
                o.insert("name".into(), n.as_str().into());
            }
            Key::Port { host, name } | Key::Endpoint { host, name } => {
                o.insert("host".into(), host.as_str().into());
                o.insert("name".into(), name.as_str().into());
            }
        }
        model::parse(&k, &kv.value)
    });
    if let Err(e) = checked {
        o.insert("key".into(), kv.key.as_str().into());
        o.insert("error".into(), e.into());
    }
    Value::Object(o)
}
