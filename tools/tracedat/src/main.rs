//! `tracedat`: the host side of `./qemu-run.sh --record` and `--flamegraph`.
//!
//! ```text
//! tracedat dat STREAM KERNEL.elf OUT.dat          trace.dat (trace-cmd format v6)
//! tracedat flamegraph STREAM KERNEL.elf OUT.svg   a flame graph of function_graph data
//! ```
//!
//! STREAM is what the kernel sent through its trace channel at power-off
//! (`trace::export::stream`); KERNEL.elf is the image it ran, whose `.kernel_symbols`
//! section gives the names. The output is written to a temporary file beside
//! OUT and renamed into place only when complete: an error (nothing recorded,
//! a broken channel, an unwritable path) leaves no partial file.

mod dat;
mod flame;
mod symbols;

use std::path::Path;
use std::process::ExitCode;

use trace::export::stream::{self, Stream};

fn read_stream(path: &Path) -> Result<Stream, String> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(format!("cannot read the trace stream {}: {e}", path.display())),
    };
    stream::parse(&bytes).map_err(|e| e.to_string())
}

/// Writes `bytes` to `out` through a temporary file, so that `out` is either
/// complete or untouched.
fn write_atomically(out: &Path, bytes: &[u8]) -> Result<(), String> {
    let temporary = out.with_extension("partial");
    std::fs::write(&temporary, bytes).and_then(|()| std::fs::rename(&temporary, out)).map_err(|e| {
        let _ = std::fs::remove_file(&temporary);
        format!("cannot write {}: {e}", out.display())
    })
}

fn run(args: &[String]) -> Result<String, String> {
    let [_, command, stream_path, elf, out] = args else {
        return Err("usage: tracedat dat|flamegraph STREAM KERNEL.elf OUT".into());
    };
    let stream = read_stream(Path::new(stream_path))?;
    let image = std::fs::read(elf).map_err(|e| format!("cannot read {elf}: {e}"))?;
    let symbols = symbols::Symbols::from_elf(&image)?;
    let out = Path::new(out);
    match command.as_str() {
        "dat" => {
            let events = dat::count_events(&stream);
            if events == 0 {
                return Err("the session recorded nothing (the trace buffer was empty)".into());
            }
            write_atomically(out, &dat::write(&stream, &symbols.kallsyms_text())?)?;
            Ok(format!("{}: {events} events", out.display()))
        }
        "flamegraph" => {
            let folded = flame::fold(&stream, &symbols)?;
            let svg = flame::render(&folded)?;
            write_atomically(out, &svg)?;
            Ok(format!("{}: {} stacks", out.display(), folded.len()))
        }
        other => Err(format!("unknown command '{other}' (dat, flamegraph)")),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    match run(&args) {
        Ok(report) => {
            eprintln!("tracedat: {report}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("tracedat: {message}");
            ExitCode::FAILURE
        }
    }
}
