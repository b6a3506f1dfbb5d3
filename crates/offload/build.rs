//! Builds the kernel program (bpf/fast_path.c: the fast path at XDP and at TC, the AF_XDP
//! redirect) with clang, so that the object ovrd loads always matches the source next to
//! it.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let src = "bpf/fast_path.c";
    println!("cargo:rerun-if-changed={src}");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let obj = out.join("fast_path.o");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".to_string());
    let status = Command::new(&clang)
        .args(["-O2", "-g", "-target", "bpf", "-Wall", "-Werror"])
        // The asm/ headers linux/bpf.h includes live in the multiarch directory.
        .arg("-I/usr/include/x86_64-linux-gnu")
        .args(["-c", src, "-o"])
        .arg(&obj)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("{clang} failed to build {src} ({s})"),
        Err(e) => panic!(
            "cannot run {clang} to build the fast path program {src}: {e}\n\
             install clang and libbpf-dev (scripts/setup.sh does), or set CLANG"
        ),
    }
}
