//! Starting the agent in a daemon: the starting configuration installed, the listeners
//! bound (errors reported before forwarding starts), and the API served on its own
//! thread with its own tokio runtime.

use crate::Agent;
use crate::api::{AppState, DEFAULT_BODY_LIMIT, router};
use crate::listen::Limits;
use crate::store::{Source, Store, StoreError, in_file, initial};
use crate::worker::{Requests, channel};
use ovr_config::FlowSettings;
use ovr_tables::state::{TablesReader, new_tables};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use tracing::{info, warn};

/// Where the API listens and where the state lives.
#[derive(Debug, Clone)]
pub struct Options {
    pub config: Option<PathBuf>,
    pub state: Option<PathBuf>,
    pub socket: Option<PathBuf>,
    /// ADDR:PORT; needs `token_file`.
    pub listen: Option<String>,
    pub token_file: Option<PathBuf>,
    /// Forwarding workers, each with its own request channel.
    pub workers: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Usage(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> StartError {
    let what = what.into();
    move |source| StartError::Io { what, source }
}

/// What the daemon's worker needs.
pub struct Started {
    pub reader: TablesReader,
    pub flows: FlowSettings,
    /// One per worker, drained once per loop iteration (`worker::drain`).
    pub requests: Vec<Requests>,
    pub state: AppState,
    /// The API, bound but not served yet.
    pub api: Api,
    /// The tables are those the previous ovrd left (from the state file), not a
    /// configuration new to the state (what a pinned fast path was described from).
    pub resumed: bool,
}

/// The listeners, bound, served once the daemon says it forwards (`Api::serve`).
pub struct Api {
    state: AppState,
    unix: Option<std::os::unix::net::UnixListener>,
    tcp: Option<(std::net::TcpListener, Arc<str>)>,
}

impl Api {
    /// The daemon forwards with the configuration (its interfaces are open): saves the
    /// state (nothing was written before: a start that fails leaves the state file as
    /// it was) and starts serving the API on its own thread.
    pub fn serve(self) -> Result<(), StartError> {
        self.state
            .agent()
            .lock()
            .map_err(|_| StartError::Usage("the agent's lock is poisoned".into()))?
            .started()?;
        let Api { state, unix, tcp } = self;
        crate::health::watch(state.clone()).map_err(io("health thread"))?;
        std::thread::Builder::new()
            .name("ovr-api".into())
            .spawn(move || serve(state, unix, tcp))
            .map_err(io("API thread"))?;
        Ok(())
    }
}

/// Installs the starting configuration and binds the listeners; nothing is saved and
/// nothing served until the daemon calls `Api::serve`.
pub fn start(o: &Options) -> Result<Started, StartError> {
    let store = o.state.clone().map(Store::new);
    let start = initial(o.config.as_deref(), store.as_ref())?;
    let resumed = matches!(start.source, Source::State);
    match &start.source {
        Source::ConfigFile => info!("starting from the configuration file"),
        Source::State => info!(state = ?o.state, "starting from the saved state"),
        Source::ConfigFileChanged { previous_state } => warn!(
            previous = %previous_state.display(),
            "the configuration file changed since the state was saved: it replaces the state (the previous state is kept)"
        ),
    }
    let source = start.source.clone();
    let (writer, reader) = new_tables();
    let agent = Agent::start_unsaved(start, writer, store.clone())
        .map_err(|e| in_file(e, &source, o.config.as_deref(), store.as_ref()))?;
    let flows = agent.config().flows;
    let (client, requests) = channel(o.workers);
    let state = AppState::new(agent, Some(client));

    let unix = o.socket.as_ref().map(|p| bind_unix(p)).transpose()?;
    let tcp = match (&o.listen, &o.token_file) {
        (Some(addr), Some(tf)) => {
            let token = read_token(tf)?;
            let l = std::net::TcpListener::bind(addr).map_err(io(format!("listen on {addr}")))?;
            l.set_nonblocking(true).map_err(io("listener"))?;
            info!(%addr, "API on TCP (plain HTTP, bearer token required)");
            Some((l, Arc::<str>::from(token)))
        }
        (Some(_), None) => {
            return Err(StartError::Usage(
                "--api-listen needs --api-token-file: the TCP API requires a bearer token".into(),
            ));
        }
        (None, _) => None,
    };
    Ok(Started {
        reader,
        flows,
        requests,
        api: Api {
            state: state.clone(),
            unix,
            tcp,
        },
        state,
        resumed,
    })
}

/// The shortest bearer token accepted (bytes): 32 random bytes' worth of guessing.
pub const MIN_TOKEN_LEN: usize = 32;

/// Reads the TCP listener's token: the file must be the owner's alone (no group or
/// other permission: a token others can read is no secret) and the token long enough.
fn read_token(tf: &std::path::Path) -> Result<String, StartError> {
    let what = tf.display().to_string();
    let mode = std::fs::metadata(tf)
        .map_err(io(what.clone()))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        return Err(StartError::Usage(format!(
            "{what}: the token file is open to group or others (mode {:o}): chmod 600 it",
            mode & 0o7777
        )));
    }
    let token = std::fs::read_to_string(tf).map_err(io(what.clone()))?;
    let token = token.trim();
    if token.len() < MIN_TOKEN_LEN {
        return Err(StartError::Usage(format!(
            "{what}: the token is {} bytes; at least {MIN_TOKEN_LEN} are needed (e.g. `openssl rand -hex 32 > {what}`)",
            token.len()
        )));
    }
    Ok(token.to_string())
}

/// Lifts the soft descriptor limit to the hard one (each API connection is one), and
/// answers the connection cap per listener that it allows.
fn connection_cap() -> usize {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut l = getrlimit(Resource::Nofile);
    if l.current < l.maximum {
        l.current = l.maximum;
        if let Err(e) = setrlimit(Resource::Nofile, l) {
            warn!("raising the descriptor limit: {e}");
        }
    }
    let now = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    crate::listen::cap(now)
}

/// Binds the Unix socket, owner-only (0600), replacing a stale one.
fn bind_unix(path: &std::path::Path) -> Result<std::os::unix::net::UnixListener, StartError> {
    let what = path.display().to_string();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.exists()
    {
        std::fs::create_dir_all(dir).map_err(io(dir.display().to_string()))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(io(dir.display().to_string()))?;
    }
    if let Ok(m) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if !m.file_type().is_socket() {
            return Err(StartError::Usage(format!(
                "{what} exists and is not a socket"
            )));
        }
        // A socket nobody answers on is left over from an earlier ovrd.
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(StartError::Usage(format!(
                "{what}: another ovrd is serving there"
            )));
        }
        std::fs::remove_file(path).map_err(io(what.clone()))?;
    }
    let l = std::os::unix::net::UnixListener::bind(path).map_err(io(what.clone()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(io(what.clone()))?;
    l.set_nonblocking(true).map_err(io(what.clone()))?;
    info!(socket = %what, "API on the Unix socket");
    Ok(l)
}

/// The API thread's nice value: under a burst of changes the forwarding workers, at the
/// default priority, get the CPU first; the changes wait. Threads this one starts (the
/// runtime's blocking pool, where changes are translated and committed) inherit it.
const API_NICE: i32 = 10;

/// The API's async threads at most.
const API_THREADS: usize = 2;

fn serve(
    state: AppState,
    unix: Option<std::os::unix::net::UnixListener>,
    tcp: Option<(std::net::TcpListener, Arc<str>)>,
) {
    // Linux keeps a nice value per thread.
    if let Err(e) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), API_NICE) {
        warn!("API thread priority: {e}");
    }
    // Two threads (at this nice value too: they inherit it) so that a burst of requests
    // (a thousand dashboards' reads at once) is answered on two cores when they are free.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(API_THREADS));
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("ovr-api")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            warn!("API runtime: {e}; the API is not served");
            return;
        }
    };
    let limits = Limits {
        max: connection_cap(),
        ..Limits::default()
    };
    info!(
        header_timeout_s = limits.header.as_secs(),
        idle_timeout_s = limits.idle.as_secs(),
        max_connections = limits.max,
        "API connection limits (per listener)"
    );
    rt.block_on(async move {
        let mut tasks = Vec::new();
        if let Some(l) = unix {
            let app = router(state.clone(), DEFAULT_BODY_LIMIT, None);
            match tokio::net::UnixListener::from_std(l) {
                Ok(l) => tasks.push(tokio::spawn(crate::listen::serve(l, app, limits))),
                Err(e) => warn!("API socket: {e}"),
            }
        }
        if let Some((l, token)) = tcp {
            let app = router(state.clone(), DEFAULT_BODY_LIMIT, Some(token));
            match tokio::net::TcpListener::from_std(l) {
                Ok(l) => tasks.push(tokio::spawn(crate::listen::serve(l, app, limits))),
                Err(e) => warn!("API listener: {e}"),
            }
        }
        for t in tasks {
            if let Err(e) = t.await {
                warn!("API server task: {e}");
            }
        }
    });
}
