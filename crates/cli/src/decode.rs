//! `ovrctl decode`: each packet of a capture as ovr's parsers see it.

use std::path::Path;

pub fn run(_pcap: &Path) -> Result<(), String> {
    Err("decode: not yet built".into())
}
