//! `ovrctl decode`: each packet of a capture as ovr's parsers see it, and a count of
//! the drop reasons the dataplane would record. Records the capture reader leaves out
//! (cut by the snapshot length, of a link type ovr does not read) are shown in their
//! place with their reason, so that the numbers stay Wireshark's frame numbers.

use crate::capfile;
use ovr_wire::dissect::dissect;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;

pub fn run(path: &Path, json: bool) -> Result<(), String> {
    let mut reader = capfile::open(path, [0; 6])?;
    let mut drops: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut packets = Vec::new();
    let mut n = 0usize;
    for r in reader.by_ref() {
        n += 1;
        let (line, layers, drop) = match &r.frame {
            Ok(f) => {
                let mut d = dissect(&f.data);
                // A made-up Ethernet header is shown as the link header it stands for.
                if let Some(link) = &f.link {
                    if d.layers.first().is_some_and(|l| l.starts_with("eth ")) {
                        d.layers[0] = link.clone();
                    } else {
                        d.layers.insert(0, link.clone());
                    }
                }
                let drop = d.error.map(|e| (e.name(), e.description().to_string()));
                (d.to_string(), d.layers, drop)
            }
            Err(s) => (
                format!("DROP {}: {}", s.reason, s.detail),
                Vec::new(),
                Some((s.reason, s.detail.clone())),
            ),
        };
        if let Some((reason, _)) = &drop {
            *drops.entry(reason).or_default() += 1;
        }
        if json {
            packets.push(json!({
                "number": r.number,
                "time": r.time.as_secs_f64(),
                "layers": layers,
                "drop": drop.as_ref().map(|d| d.0),
                "detail": drop.as_ref().map(|d| d.1.clone()),
            }));
        } else {
            outln!("{:>4}  {line}", r.number);
        }
    }
    let dropped: usize = drops.values().sum();
    if json {
        let v = json!({
            "file": path.display().to_string(),
            "format": reader.format,
            "packets": packets,
            "total": n,
            "well_formed": n - dropped,
            "dropped": drops,
            "warnings": reader.warnings,
        });
        outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok(());
    }
    for w in &reader.warnings {
        eprintln!("ovrctl: warning: {w}");
    }
    outln!(
        "{n} packets: {} well-formed, {dropped} would be dropped",
        n - dropped
    );
    for (reason, count) in drops {
        outln!("  drop {reason}: {count}");
    }
    Ok(())
}
