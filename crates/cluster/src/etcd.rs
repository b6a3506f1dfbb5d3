//! `Store` on a real etcd (v3 API, through the etcd-client crate). Unary requests get a
//! deadline each; the watch stream has none (it lives as long as etcd does), and HTTP/2
//! keepalives tell a dead member from a quiet one.

use crate::store::{Event, Kv, Snapshot, Store, StoreError, Watch};
use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, Identity,
    PutOptions, TlsOptions, Txn, TxnOp, WatchOptions, WatchStream,
};
use std::path::PathBuf;
use std::time::Duration;

/// How long a single request may take before etcd counts as unavailable.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// How to reach etcd.
#[derive(Debug, Clone, Default)]
pub struct Endpoints {
    /// Client URLs (`http://H:P` or `https://H:P`).
    pub urls: Vec<String>,
    /// TLS: the CA that signed the members' certificates, and this client's certificate
    /// and key (all PEM), for a cluster that requires client certificates.
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

#[derive(Clone)]
pub struct Etcd {
    client: Client,
}

fn unavailable(e: etcd_client::Error) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

/// A request the client's balancer sent to a member that is down is sent again (up to
/// this many times) at once: the balancer still lists that member, and the next try
/// most likely reaches another one.
const RETRIES: usize = 4;

/// Runs a request (made by `f` on a clone of the client) with a deadline, sending it
/// again while it is refused for want of a connection.
async fn request<T, F>(client: &Client, mut f: impl FnMut(Client) -> F) -> Result<T, StoreError>
where
    F: Future<Output = Result<T, etcd_client::Error>>,
{
    let tries = async {
        let mut left = RETRIES;
        loop {
            match f(client.clone()).await {
                Err(e) if left > 0 && refused(&e) => left -= 1,
                r => return r,
            }
        }
    };
    match tokio::time::timeout(REQUEST_TIMEOUT, tries).await {
        Ok(r) => r.map_err(unavailable),
        Err(_) => Err(StoreError::Unavailable(format!(
            "no answer within {} s",
            REQUEST_TIMEOUT.as_secs()
        ))),
    }
}

/// No connection to the member the request went to (gRPC UNAVAILABLE, 14).
fn refused(e: &etcd_client::Error) -> bool {
    match e {
        etcd_client::Error::GRpcStatus(s) => s.code() as i32 == 14,
        etcd_client::Error::TransportError(_) => true,
        _ => false,
    }
}

fn read(path: &PathBuf) -> Result<Vec<u8>, StoreError> {
    std::fs::read(path).map_err(|e| StoreError::Unavailable(format!("{}: {e}", path.display())))
}

impl Etcd {
    /// Connects lazily: an etcd that is down now is retried by each request, so that a
    /// host starts (and forwards on its saved state) before etcd is back.
    pub async fn connect(e: &Endpoints) -> Result<Self, StoreError> {
        let mut o = ConnectOptions::new()
            .with_connect_timeout(REQUEST_TIMEOUT)
            .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2))
            .with_keep_alive_while_idle(true);
        if e.ca.is_some() || e.cert.is_some() {
            let mut tls = TlsOptions::new();
            if let Some(ca) = &e.ca {
                tls = tls.ca_certificate(Certificate::from_pem(read(ca)?));
            }
            match (&e.cert, &e.key) {
                (Some(c), Some(k)) => tls = tls.identity(Identity::from_pem(read(c)?, read(k)?)),
                (None, None) => {}
                _ => {
                    return Err(StoreError::Unavailable(
                        "a client certificate needs its key, and a key its certificate".into(),
                    ));
                }
            }
            o = o.with_tls(tls);
        }
        let client = Client::connect(&e.urls, Some(o))
            .await
            .map_err(unavailable)?;
        Ok(Self { client })
    }

    /// Writes `key` only if it does not exist (one transaction on its version, so two
    /// writers cannot both create it): the revision written at, or `None` when the key
    /// was there and nothing was written.
    pub async fn create(&self, key: &str, value: Vec<u8>) -> Result<Option<i64>, StoreError> {
        let r = request(&self.client, |mut c| {
            let txn = Txn::new()
                .when([Compare::version(key, CompareOp::Equal, 0)])
                .and_then([TxnOp::put(key, value.clone(), None)]);
            async move { c.txn(txn).await }
        })
        .await?;
        Ok(r.succeeded().then(|| revision(r.header())))
    }

    /// Writes `key` whether or not it exists: the revision written at.
    pub async fn replace(&self, key: &str, value: Vec<u8>) -> Result<i64, StoreError> {
        let r = request(&self.client, |mut c| {
            let v = value.clone();
            async move { c.put(key, v, None).await }
        })
        .await?;
        Ok(revision(r.header()))
    }

    /// Deletes `key`: the revision deleted at, or `None` when there was no such key.
    pub async fn remove(&self, key: &str) -> Result<Option<i64>, StoreError> {
        let r = request(
            &self.client,
            |mut c| async move { c.delete(key, None).await },
        )
        .await?;
        Ok((r.deleted() > 0).then(|| revision(r.header())))
    }
}

fn revision(h: Option<&etcd_client::ResponseHeader>) -> i64 {
    h.map_or(0, |h| h.revision())
}

fn kv(k: &etcd_client::KeyValue) -> Kv {
    Kv {
        key: String::from_utf8_lossy(k.key()).into_owned(),
        value: k.value().to_vec(),
        create_revision: k.create_revision(),
        mod_revision: k.mod_revision(),
        lease: k.lease(),
    }
}

pub struct EtcdWatch {
    stream: WatchStream,
}

impl Watch for EtcdWatch {
    async fn next(&mut self) -> Result<Option<Vec<Event>>, StoreError> {
        loop {
            let Some(r) = self.stream.message().await.map_err(unavailable)? else {
                return Ok(None);
            };
            if r.compact_revision() > 0 {
                return Err(StoreError::Compacted {
                    compact_revision: r.compact_revision(),
                });
            }
            if r.canceled() {
                return Err(StoreError::Unavailable(format!(
                    "watch canceled: {}",
                    r.cancel_reason()
                )));
            }
            if r.events().is_empty() {
                continue; // the creation notice, or progress
            }
            let events = r
                .events()
                .iter()
                .filter_map(|e| {
                    let k = e.kv()?;
                    Some(match e.event_type() {
                        EventType::Put => Event::Put(kv(k)),
                        EventType::Delete => Event::Delete {
                            key: String::from_utf8_lossy(k.key()).into_owned(),
                            revision: k.mod_revision(),
                        },
                    })
                })
                .collect();
            return Ok(Some(events));
        }
    }
}

impl Store for Etcd {
    type Watch = EtcdWatch;

    async fn list(&self, prefix: &str) -> Result<Snapshot, StoreError> {
        let r = request(&self.client, |mut c| async move {
            c.get(prefix, Some(GetOptions::new().with_prefix())).await
        })
        .await?;
        Ok(Snapshot {
            revision: revision(r.header()),
            kvs: r.kvs().iter().map(kv).collect(),
        })
    }

    async fn watch(&self, prefix: &str, revision: i64) -> Result<EtcdWatch, StoreError> {
        let stream = request(&self.client, |mut c| async move {
            let o = WatchOptions::new()
                .with_prefix()
                .with_start_revision(revision);
            c.watch(prefix, Some(o)).await
        })
        .await?;
        Ok(EtcdWatch { stream })
    }

    async fn grant(&self, ttl_s: i64) -> Result<i64, StoreError> {
        let r = request(&self.client, |mut c| async move {
            c.lease_grant(ttl_s, None).await
        });
        Ok(r.await?.id())
    }

    async fn keep_alive(&self, lease: i64) -> Result<(), StoreError> {
        let round = request(&self.client, |mut c| async move {
            let (mut keeper, mut stream) = c.lease_keep_alive(lease).await?;
            keeper.keep_alive().await?;
            stream.message().await
        });
        match round.await? {
            Some(r) if r.ttl() > 0 => Ok(()),
            _ => Err(StoreError::LeaseGone(lease)),
        }
    }

    async fn revoke(&self, lease: i64) -> Result<(), StoreError> {
        request(
            &self.client,
            |mut c| async move { c.lease_revoke(lease).await },
        )
        .await
        .map(|_| ())
    }

    async fn put(&self, key: &str, value: Vec<u8>, lease: i64) -> Result<(), StoreError> {
        let put = request(&self.client, |mut c| {
            let (v, o) = (
                value.clone(),
                (lease != 0).then(|| PutOptions::new().with_lease(lease)),
            );
            async move { c.put(key, v, o).await }
        });
        match put.await {
            Err(StoreError::Unavailable(m)) if m.contains("requested lease not found") => {
                Err(StoreError::LeaseGone(lease))
            }
            r => r.map(|_| ()),
        }
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        request(
            &self.client,
            |mut c| async move { c.delete(key, None).await },
        )
        .await
        .map(|_| ())
    }
}
