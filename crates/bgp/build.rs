//! The GoBGP client is generated from the .proto files GoBGP itself ships (Debian's
//! golang-github-osrg-gobgp-dev), read where they are installed: never a copy that could
//! drift from the gobgpd it talks to. `OVR_GOBGP_PROTO_DIR` points elsewhere; the
//! google/protobuf imports come from protoc's include directory (libprotobuf-dev).

use std::path::PathBuf;

const DEFAULT_DIR: &str = "/usr/share/gocode/src/github.com/osrg/gobgp/api";

fn main() {
    println!("cargo:rerun-if-env-changed=OVR_GOBGP_PROTO_DIR");
    let dir = PathBuf::from(std::env::var("OVR_GOBGP_PROTO_DIR").unwrap_or(DEFAULT_DIR.into()));
    let protos: Vec<PathBuf> = ["gobgp.proto", "attribute.proto", "capability.proto"]
        .iter()
        .map(|p| dir.join(p))
        .collect();
    for p in &protos {
        if !p.exists() {
            panic!(
                "{} is missing: install golang-github-osrg-gobgp-dev (scripts/setup.sh does), \
                 or set OVR_GOBGP_PROTO_DIR",
                p.display()
            );
        }
        println!("cargo:rerun-if-changed={}", p.display());
    }
    // Type names let `prost_types::Any` carry GoBGP's own message names (its API
    // dispatches on them: "type.googleapis.com/apipb.EVPNMACIPAdvertisementRoute").
    let mut config = prost_build::Config::new();
    config.enable_type_names();
    config.type_name_domain(["."], "type.googleapis.com");
    tonic_prost_build::configure()
        .build_server(false)
        .compile_with_config(config, &protos, &[dir, PathBuf::from("/usr/include")])
        .unwrap_or_else(|e| panic!("compiling GoBGP's protos: {e}"));
}
