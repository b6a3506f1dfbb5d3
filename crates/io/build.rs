//! Builds the BPF programs of the drivers with clang, so that the objects the daemon
//! loads always match the sources next to them: the AF_XDP driver's XDP program
//! (bpf/xsk_redirect.c) and the AF_PACKET driver's policer (bpf/police.c), both with
//! the policer of bpf/police.h.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=bpf/police.h");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".to_string());
    for name in ["xsk_redirect", "police"] {
        let src = format!("bpf/{name}.c");
        println!("cargo:rerun-if-changed={src}");
        let status = Command::new(&clang)
            // v3: the policer's compare-and-swap (BPF_ATOMIC, Linux 5.12).
            .args([
                "-O2", "-g", "-target", "bpf", "-mcpu=v3", "-Wall", "-Werror",
            ])
            // The asm/ headers linux/bpf.h includes live in the multiarch directory.
            .arg("-I/usr/include/x86_64-linux-gnu")
            .arg("-c")
            .arg(&src)
            .arg("-o")
            .arg(out.join(format!("{name}.o")))
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => panic!("{clang} failed to build {src} ({s})"),
            Err(e) => panic!(
                "cannot run {clang} to build the BPF program {src}: {e}\n\
                 install clang and libbpf-dev (scripts/setup.sh does), or set CLANG"
            ),
        }
    }
}
