//! `ovrctl cluster`: the cluster's intent in etcd (networks, ports, policies, services,
//! chains: list, add,
//! show, del) and what the agents publish there (hosts, their reports), read and written
//! straight in etcd (docs/cluster.md). Every value written is checked first as the
//! agents check it, and `add` creates only (an etcd transaction) unless `--replace`.

mod args;
mod report;

use crate::api::{Failure, exit, print_as, show};
use args::{ChainArgs, Intent, NetworkArgs, PolicyArgs, PortArgs, ServiceArgs};
use clap::{Args, Subcommand};
use ovr_cluster::etcd::{Endpoints, Etcd};
use ovr_cluster::intent::{IntentError, Intents, Kind};
use ovr_cluster::keys::Key;
use ovr_cluster::store::Kv;
use serde_json::{Value, json};
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
    /// Network functions and their instances (docs/chains.md).
    Services {
        #[command(subcommand)]
        action: Option<Services>,
    },
    /// Service chains: the functions a policy rule's traffic crosses.
    Chains {
        #[command(subcommand)]
        action: Option<Chains>,
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

#[derive(Subcommand, Clone, Debug)]
pub enum Services {
    /// All of them (the default).
    List,
    /// Create one: services add fw --instance fw-1:h1:fw1-left:fw1-right.
    Add(ServiceArgs),
    Show {
        name: String,
    },
    Del {
        name: String,
    },
}

#[derive(Subcommand, Clone, Debug)]
pub enum Chains {
    /// All of them (the default).
    List,
    /// Create one: chains add through-fw --function fw.
    Add(ChainArgs),
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
            .map_err(|e| etcd_failed(&endpoints, &e.into()))?;
        let c = Ctx {
            intents: Intents::new(db),
            endpoints,
            json,
        };
        c.run(what).await
    })
}

/// A failed request: where etcd was looked for when it did not answer; "not found"
/// with its exit status; a refusal as what it is.
fn etcd_failed(e: &Endpoints, err: &IntentError) -> Failure {
    match err {
        IntentError::Unavailable(why) => {
            Failure::from(format!("etcd at {}: {why}", e.urls.join(",")))
        }
        IntentError::NotFound(_) => Failure {
            status: exit::NOT_FOUND,
            message: err.to_string(),
        },
        IntentError::Invalid(why) => Failure::from(format!("refused, nothing written: {why}")),
        IntentError::Exists(_) => Failure::from(format!("{err} (--replace overwrites it)")),
    }
}

/// What every command needs: the store, where it is, and how to print.
struct Ctx {
    intents: Intents,
    endpoints: Endpoints,
    json: bool,
}

/// The columns of each kind's table (other fields go to "details").
const NETWORK_COLUMNS: &[&str] = &["name", "vni", "encap", "flood", "subnets", "gateways"];
const PORT_COLUMNS: &[&str] = &["host", "name", "network", "mac", "ips", "interface"];
const POLICY_COLUMNS: &[&str] = &["name", "network", "rules"];
const SERVICE_COLUMNS: &[&str] = &["name", "mode", "instances"];
const CHAIN_COLUMNS: &[&str] = &["name", "functions"];

impl Ctx {
    async fn run(&self, what: Cluster) -> Result<(), Failure> {
        match what {
            Cluster::Status => report::status(self).await,
            Cluster::Hosts => report::hosts(self).await,
            Cluster::Networks { action } => match action.unwrap_or(Networks::List) {
                Networks::List => self.list(Kind::Network, None, NETWORK_COLUMNS).await,
                Networks::Add(a) => self.write(args::network(&a)).await,
                Networks::Show { name } => self.show(Key::Network(name)).await,
                Networks::Del { name } => self.delete(Key::Network(name)).await,
            },
            Cluster::Ports { action } => match action.unwrap_or(Ports::List { host: None }) {
                Ports::List { host } => self.list(Kind::Port, host.as_deref(), PORT_COLUMNS).await,
                Ports::Add(a) => self.write(args::port(&a).map_err(Failure::usage)?).await,
                Ports::Show { host, name } => self.show(Key::Port { host, name }).await,
                Ports::Del { host, name } => self.delete(Key::Port { host, name }).await,
            },
            Cluster::Policies { action } => match action.unwrap_or(Policies::List) {
                Policies::List => self.list(Kind::Policy, None, POLICY_COLUMNS).await,
                Policies::Add(a) => self.write(args::policy(&a).map_err(Failure::usage)?).await,
                Policies::Show { name } => self.show(Key::Policy(name)).await,
                Policies::Del { name } => self.delete(Key::Policy(name)).await,
            },
            Cluster::Services { action } => match action.unwrap_or(Services::List) {
                Services::List => self.list(Kind::Service, None, SERVICE_COLUMNS).await,
                Services::Add(a) => self.write(args::service(&a).map_err(Failure::usage)?).await,
                Services::Show { name } => self.show(Key::Service(name)).await,
                Services::Del { name } => self.delete(Key::Service(name)).await,
            },
            Cluster::Chains { action } => match action.unwrap_or(Chains::List) {
                Chains::List => self.list(Kind::Chain, None, CHAIN_COLUMNS).await,
                Chains::Add(a) => self.write(args::chain(&a)).await,
                Chains::Show { name } => self.show(Key::Chain(name)).await,
                Chains::Del { name } => self.delete(Key::Chain(name)).await,
            },
        }
    }

    /// Every key under `prefix`, as it was at one revision.
    async fn kvs(&self, prefix: &str) -> Result<(i64, Vec<Kv>), Failure> {
        self.intents
            .kvs(prefix)
            .await
            .map_err(|e| etcd_failed(&self.endpoints, &e))
    }

    fn print(&self, v: &Value, human: impl FnOnce(&Value)) {
        print_as(self.json, v, human);
    }

    async fn list(&self, kind: Kind, host: Option<&str>, columns: &[&str]) -> Result<(), Failure> {
        let objects = self.intents.list(kind, host).await;
        let v = Value::Array(objects.map_err(|e| etcd_failed(&self.endpoints, &e))?);
        self.print(&v, |v| show::table(columns, v));
        Ok(())
    }

    async fn show(&self, key: Key) -> Result<(), Failure> {
        let o = self.intents.get(&key).await;
        self.print(
            &o.map_err(|e| etcd_failed(&self.endpoints, &e))?,
            show::object,
        );
        Ok(())
    }

    /// Writes a checked value: created unless it exists, or replaced with `--replace`.
    async fn write(&self, i: Intent) -> Result<(), Failure> {
        let key = i.key.to_string();
        let revision = self
            .intents
            .write(&i.key, &i.value, i.replace)
            .await
            .map_err(|e| etcd_failed(&self.endpoints, &e))?;
        let v = json!({ "key": key, "revision": revision, "value": i.value });
        self.print(&v, |_| outln!("{key} written (revision {revision})"));
        Ok(())
    }

    async fn delete(&self, key: Key) -> Result<(), Failure> {
        let k = key.to_string();
        let revision = self
            .intents
            .delete(&key)
            .await
            .map_err(|e| etcd_failed(&self.endpoints, &e))?;
        let v = json!({ "key": k, "revision": revision });
        self.print(&v, |_| outln!("{k} deleted (revision {revision})"));
        Ok(())
    }
}
