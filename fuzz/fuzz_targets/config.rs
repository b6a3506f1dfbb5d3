//! Configuration files: any bytes through the loader, the translation and the tables'
//! validation, as `ovrd --config` and `ovrctl replay --config` read them. Whatever the
//! input (broken YAML, aliases, duplicates, references to nothing), the answer is a
//! configuration or an error naming where, never a panic; and what is accepted reads
//! back the same from the JSON the API and the state file hold.
#![no_main]
use libfuzzer_sys::fuzz_target;
use ovr_config::{Config, ConfigFile};
use ovr_tables::state::new_tables;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file = ConfigFile::new("fuzz.yaml", text);
    let config = match file.parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    // The string API agrees with the file's (save for an empty document).
    assert_eq!(Config::from_yaml(text).ok().as_ref(), Some(&config));
    let json = serde_json::to_string(&config).expect("a configuration serializes");
    let back: Config = serde_json::from_str(&json).expect("and reads back");
    assert_eq!(back, config);
    match config.translate() {
        Ok(t) => {
            let (mut w, _r) = new_tables();
            if let Err(e) = t.apply(&mut w) {
                let _ = file.locate(e).to_string();
            }
        }
        Err(e) => {
            let _ = file.locate(e).to_string();
        }
    }
});
