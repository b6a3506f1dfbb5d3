//! What several fuzz targets share: the example two-network host's tables.
use ovr_tables::state::{TablesReader, TablesWriter, new_tables};
use std::sync::{Mutex, OnceLock};

pub type Tables = (TablesWriter, TablesReader);

/// The tables of crates/config/examples/two-networks.yaml, built once.
pub fn tables() -> &'static Mutex<Tables> {
    static T: OnceLock<Mutex<Tables>> = OnceLock::new();
    T.get_or_init(|| {
        let yaml = include_str!("../../crates/config/examples/two-networks.yaml");
        let t = ovr_config::Config::from_yaml(yaml).unwrap().translate().unwrap();
        let (mut w, r) = new_tables();
        t.apply(&mut w).unwrap();
        Mutex::new((w, r))
    })
}
