//! `ovrctl decode`: each packet of a capture as ovr's parsers see it, and a count of
//! the drop reasons the dataplane would record.

use ovr_wire::dissect::dissect;
use pcap_file::pcap::PcapReader;
use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;

pub fn run(path: &Path) -> Result<(), String> {
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut reader =
        PcapReader::new(file).map_err(|e| format!("{}: not a pcap file: {e}", path.display()))?;
    let mut drops: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut n = 0usize;
    while let Some(pkt) = reader.next_packet() {
        let pkt = pkt.map_err(|e| format!("{}: packet {}: {e}", path.display(), n + 1))?;
        n += 1;
        let d = dissect(&pkt.data);
        println!("{n:>4}  {d}");
        if let Some(e) = d.error {
            *drops.entry(e.name()).or_default() += 1;
        }
    }
    let dropped: usize = drops.values().sum();
    println!(
        "{n} packets: {} well-formed, {dropped} would be dropped",
        n - dropped
    );
    for (reason, count) in drops {
        println!("  drop {reason}: {count}");
    }
    Ok(())
}
