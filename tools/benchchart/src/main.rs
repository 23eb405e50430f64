//! Draws the side-by-side benchmark (`bench/side-by-side.sh`) as an SVG
//! bar chart: per mode, the instructions tracing adds to one call under
//! Linux 7.2, Linux 6.12 and this kernel, one panel per architecture.
//!
//! ```text
//! benchchart OUT.svg < FIGURES
//! ```
//!
//! FIGURES has one line per bar, `ARCH MODE KERNEL INSTRUCTIONS` (for
//! example `x86_64 function ktrace 207`); the panels, modes and kernels
//! appear in the order they first occur. A malformed line is an error that
//! names it, and no file is written.

use std::io::Read;
use std::process::ExitCode;

use plotters::prelude::*;

/// One bar.
#[derive(Debug, Clone, PartialEq)]
struct Figure {
    arch: String,
    mode: String,
    kernel: String,
    instructions: f64,
}

/// Parses FIGURES; the error names the first bad line.
fn parse(text: &str) -> Result<Vec<Figure>, String> {
    let mut figures = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        let bad = || format!("line {}: expected 'ARCH MODE KERNEL INSTRUCTIONS', got '{line}'", number + 1);
        let [arch, mode, kernel, value] = words[..] else { return Err(bad()) };
        let instructions: f64 = value.parse().map_err(|_| bad())?;
        if !instructions.is_finite() || instructions < 0.0 {
            return Err(bad());
        }
        figures.push(Figure { arch: arch.into(), mode: mode.into(), kernel: kernel.into(), instructions });
    }
    if figures.is_empty() {
        return Err("no figures".into());
    }
    Ok(figures)
}

/// The distinct values of `key`, in the order they first occur.
fn distinct(figures: &[Figure], key: impl Fn(&Figure) -> &str) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for figure in figures {
        if !seen.iter().any(|s| s == key(figure)) {
            seen.push(key(figure).to_string());
        }
    }
    seen
}

const COLOURS: [RGBColor; 4] =
    [RGBColor(0x4c, 0x72, 0xb0), RGBColor(0x93, 0xb5, 0xd8), RGBColor(0xdd, 0x84, 0x52), RGBColor(0x55, 0xa8, 0x68)];

fn draw(figures: &[Figure], out: &str) -> Result<(), Box<dyn std::error::Error>> {
    let arches = distinct(figures, |f| &f.arch);
    let modes = distinct(figures, |f| &f.mode);
    let kernels = distinct(figures, |f| &f.kernel);
    let root = SVGBackend::new(out, (960, 420 * arches.len() as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((arches.len(), 1));
    for (panel, arch) in panels.iter().zip(&arches) {
        let top = figures.iter().filter(|f| &f.arch == arch).map(|f| f.instructions).fold(0.0, f64::max);
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("{arch}: instructions tracing adds to one call (QEMU -icount)"), ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..modes.len() as f64, 0.0..top * 1.15)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(modes.len() * 2 + 1)
            .x_label_formatter(&|x| {
                let index = x.floor() as usize;
                let centred = (x - index as f64 - 0.5).abs() < 1e-6;
                if centred {
                    modes.get(index).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc("instructions per call")
            .draw()?;
        let width = 0.8 / kernels.len() as f64;
        for (k, kernel) in kernels.iter().enumerate() {
            let colour = COLOURS[k % COLOURS.len()];
            let bars = modes.iter().enumerate().filter_map(|(m, mode)| {
                let figure = figures.iter().find(|f| &f.arch == arch && &f.mode == mode && &f.kernel == kernel)?;
                let left = m as f64 + 0.1 + k as f64 * width;
                Some(Rectangle::new([(left, 0.0), (left + width * 0.9, figure.instructions)], colour.filled()))
            });
            chart
                .draw_series(bars)?
                .label(kernel.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, out] = &args[..] else {
        eprintln!("usage: benchchart OUT.svg < FIGURES  (lines: ARCH MODE KERNEL INSTRUCTIONS)");
        return ExitCode::from(2);
    };
    let mut text = String::new();
    if let Err(error) = std::io::stdin().read_to_string(&mut text) {
        eprintln!("benchchart: {error}");
        return ExitCode::FAILURE;
    }
    let figures = match parse(&text) {
        Ok(figures) => figures,
        Err(error) => {
            eprintln!("benchchart: {error}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(error) = draw(&figures, out) {
        let _ = std::fs::remove_file(out);
        eprintln!("benchchart: {error}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_parse_and_bad_lines_are_named() {
        let figures = parse("x86_64 function linux-7.2 574\n\naarch64 function ktrace 239.0\n").unwrap();
        assert_eq!(figures.len(), 2);
        assert_eq!(
            figures[1],
            Figure { arch: "aarch64".into(), mode: "function".into(), kernel: "ktrace".into(), instructions: 239.0 }
        );
        assert_eq!(
            parse("x86_64 function 574").unwrap_err(),
            "line 1: expected 'ARCH MODE KERNEL INSTRUCTIONS', got 'x86_64 function 574'"
        );
        assert!(parse("a b c -1").is_err());
        assert!(parse("a b c many").is_err());
        assert_eq!(parse("\n").unwrap_err(), "no figures");
    }

    #[test]
    fn the_chart_has_a_bar_per_figure() {
        let figures =
            parse("x86_64 function linux 500\nx86_64 function ktrace 200\nx86_64 graph linux 900\nx86_64 graph ktrace 400\n")
                .unwrap();
        let out = std::env::temp_dir().join(format!("benchchart-test-{}.svg", std::process::id()));
        draw(&figures, out.to_str().unwrap()).unwrap();
        let svg = std::fs::read_to_string(&out).unwrap();
        std::fs::remove_file(&out).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("x86_64: instructions tracing adds"));
        let texts: Vec<&str> =
            svg.split("<text").skip(1).filter_map(|t| t.split('>').nth(1)?.split('<').next()).map(str::trim).collect();
        for label in ["function", "graph", "ktrace", "linux"] {
            assert!(texts.contains(&label), "{label} among {texts:?}");
        }
        // Two bars and a legend key in each kernel's colour.
        assert_eq!(svg.matches("fill=\"#4C72B0\"").count(), 3, "{svg}");
        assert_eq!(svg.matches("fill=\"#93B5D8\"").count(), 3, "{svg}");
    }
}
