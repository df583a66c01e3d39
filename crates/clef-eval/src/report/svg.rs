//! Inline SVG charts for the HTML report (no scripts, no network, no fonts to fetch).

use std::fmt::Write;

use super::format::{self, html};
use crate::histogram::DpHistogram;
use crate::metrics::ReliabilityBin;

const BAR: &str = "#3b6fb6";
const GAP: &str = "#d9534f";
const INK: &str = "#222";
const GRID: &str = "#ddd";

/// Plot geometry: the area inside the axes, in SVG units.
struct Frame {
    width: f64,
    height: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
}

impl Frame {
    fn plot_width(&self) -> f64 {
        self.width - self.left - self.right
    }
    fn plot_height(&self) -> f64 {
        self.height - self.top - self.bottom
    }
    /// x in [0, 1] → SVG x.
    fn x(&self, x: f64) -> f64 {
        self.left + x.clamp(0.0, 1.0) * self.plot_width()
    }
    /// y in [0, 1] → SVG y (up is 1).
    fn y(&self, y: f64) -> f64 {
        self.height - self.bottom - y.clamp(0.0, 1.0) * self.plot_height()
    }

    fn open(&self, out: &mut String, class: &str, title: &str) {
        let _ = write!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"{class}\" width=\"{w}\" height=\"{h}\" \
             viewBox=\"0 0 {w} {h}\" role=\"img\" font-family=\"sans-serif\" font-size=\"12\">\n\
             <title>{title}</title>\n\
             <rect x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"#fff\"/>\n",
            w = self.width,
            h = self.height,
            title = html(title),
        );
    }

    fn axes(&self, out: &mut String, x_label: &str, y_label: &str) {
        let (x0, x1, y0, y1) = (self.x(0.0), self.x(1.0), self.y(0.0), self.y(1.0));
        let _ = write!(
            out,
            "<line class=\"axis\" x1=\"{x0:.1}\" y1=\"{y0:.1}\" x2=\"{x1:.1}\" y2=\"{y0:.1}\" stroke=\"{INK}\"/>\n\
             <line class=\"axis\" x1=\"{x0:.1}\" y1=\"{y0:.1}\" x2=\"{x0:.1}\" y2=\"{y1:.1}\" stroke=\"{INK}\"/>\n\
             <text class=\"axis-label\" x=\"{cx:.1}\" y=\"{xl:.1}\" text-anchor=\"middle\" fill=\"{INK}\">{x_label}</text>\n\
             <text class=\"axis-label\" x=\"{yl:.1}\" y=\"{cy:.1}\" text-anchor=\"middle\" fill=\"{INK}\" \
             transform=\"rotate(-90 {yl:.1} {cy:.1})\">{y_label}</text>\n",
            cx = (x0 + x1) / 2.0,
            xl = self.height - 10.0,
            yl = 16.0,
            cy = (y0 + y1) / 2.0,
            x_label = html(x_label),
            y_label = html(y_label),
        );
    }
}

/// Reliability diagram: per bin, a bar at the bin's accuracy, the gap to its mean confidence
/// in red, its question count on top, and the diagonal of perfect calibration.
pub(crate) fn reliability(label: &str, bins: &[ReliabilityBin], ece: Option<f64>) -> String {
    let frame = Frame {
        width: 440.0,
        height: 380.0,
        left: 58.0,
        right: 16.0,
        top: 34.0,
        bottom: 56.0,
    };
    let n: usize = bins.iter().map(|b| b.count).sum();
    let title = format!("{label}: ECE {} (n = {n})", format::opt(ece, 3));
    let mut out = String::new();
    frame.open(
        &mut out,
        "reliability",
        &format!("Reliability diagram, {title}"),
    );
    let _ = writeln!(
        out,
        "<text class=\"chart-title\" x=\"{:.1}\" y=\"20\" text-anchor=\"middle\" font-weight=\"bold\" fill=\"{INK}\">{}</text>",
        frame.width / 2.0,
        html(&title)
    );
    for i in 0..=5 {
        let v = i as f64 / 5.0;
        let (x, y) = (frame.x(v), frame.y(v));
        let _ = write!(
            out,
            "<line class=\"grid\" x1=\"{x0:.1}\" y1=\"{y:.1}\" x2=\"{x1:.1}\" y2=\"{y:.1}\" stroke=\"{GRID}\"/>\n\
             <text class=\"tick\" x=\"{tx:.1}\" y=\"{ty:.1}\" text-anchor=\"end\" fill=\"{INK}\">{v:.1}</text>\n\
             <text class=\"tick\" x=\"{x:.1}\" y=\"{bx:.1}\" text-anchor=\"middle\" fill=\"{INK}\">{v:.1}</text>\n",
            x0 = frame.x(0.0),
            x1 = frame.x(1.0),
            tx = frame.left - 6.0,
            ty = y + 4.0,
            bx = frame.y(0.0) + 16.0,
        );
    }
    for bin in bins {
        let (Some(accuracy), Some(confidence)) = (bin.accuracy, bin.mean_confidence) else {
            continue;
        };
        let (x0, x1) = (frame.x(bin.lo) + 1.0, frame.x(bin.hi) - 1.0);
        let (top, base) = (frame.y(accuracy), frame.y(0.0));
        let tooltip = format!(
            "confidence ({:.3}, {:.3}]: {} questions, accuracy {:.3}, mean confidence {:.3}",
            bin.lo, bin.hi, bin.count, accuracy, confidence
        );
        let _ = writeln!(
            out,
            "<rect class=\"rel-bar\" x=\"{x0:.1}\" y=\"{top:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{BAR}\"><title>{t}</title></rect>",
            w = x1 - x0,
            h = base - top,
            t = html(&tooltip),
        );
        let (hi, lo) = (
            frame.y(accuracy.max(confidence)),
            frame.y(accuracy.min(confidence)),
        );
        if lo - hi > 0.05 {
            let _ = writeln!(
                out,
                "<rect class=\"rel-gap\" x=\"{x0:.1}\" y=\"{hi:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{GAP}\" fill-opacity=\"0.35\" stroke=\"{GAP}\"/>",
                w = x1 - x0,
                h = lo - hi,
            );
        }
        let _ = writeln!(
            out,
            "<text class=\"bin-count\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"9\" fill=\"{INK}\">{}</text>",
            (x0 + x1) / 2.0,
            hi - 3.0,
            bin.count
        );
    }
    let _ = writeln!(
        out,
        "<line class=\"diagonal\" x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{INK}\" stroke-dasharray=\"5 4\"/>",
        frame.x(0.0),
        frame.y(0.0),
        frame.x(1.0),
        frame.y(1.0)
    );
    frame.axes(&mut out, "confidence (max probability)", "accuracy");
    out.push_str("</svg>\n");
    out
}

/// Histogram of |dp| over decade bins; bar heights are linear counts.
pub(crate) fn dp_histogram(histogram: &DpHistogram) -> String {
    let frame = Frame {
        width: 600.0,
        height: 330.0,
        left: 64.0,
        right: 16.0,
        top: 34.0,
        bottom: 62.0,
    };
    let total = histogram.total();
    let max = histogram.bins.iter().map(|b| b.count).max().unwrap_or(0);
    let step = tick_step(max);
    let top_value = (max.div_ceil(step).max(1) * step) as f64;
    let mut out = String::new();
    frame.open(&mut out, "dp-histogram", "Histogram of |dp| per option");
    let _ = writeln!(
        out,
        "<text class=\"chart-title\" x=\"{:.1}\" y=\"20\" text-anchor=\"middle\" font-weight=\"bold\" fill=\"{INK}\">|dp| per option ({total} values)</text>",
        frame.width / 2.0
    );
    let mut tick = 0;
    while tick as f64 <= top_value {
        let y = frame.y(tick as f64 / top_value);
        let _ = write!(
            out,
            "<line class=\"grid\" x1=\"{x0:.1}\" y1=\"{y:.1}\" x2=\"{x1:.1}\" y2=\"{y:.1}\" stroke=\"{GRID}\"/>\n\
             <text class=\"tick\" x=\"{tx:.1}\" y=\"{ty:.1}\" text-anchor=\"end\" fill=\"{INK}\">{tick}</text>\n",
            x0 = frame.x(0.0),
            x1 = frame.x(1.0),
            tx = frame.left - 6.0,
            ty = y + 4.0,
        );
        tick += step;
    }
    let slots = histogram.bins.len().max(1) as f64;
    for (i, bin) in histogram.bins.iter().enumerate() {
        let (x0, x1) = (frame.x(i as f64 / slots), frame.x((i + 1) as f64 / slots));
        let centre = (x0 + x1) / 2.0;
        let label = bin_label(bin.lo, bin.hi);
        let _ = writeln!(
            out,
            "<text class=\"tick\" x=\"{centre:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"{INK}\">{}</text>",
            frame.y(0.0) + 16.0,
            html(&label)
        );
        if bin.count == 0 {
            continue;
        }
        let top = frame.y(bin.count as f64 / top_value);
        let _ = writeln!(
            out,
            "<rect class=\"dp-bar\" x=\"{:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{BAR}\"><title>|dp| {}: {}</title></rect>\n\
             <text class=\"bar-count\" x=\"{centre:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"10\" fill=\"{INK}\">{}</text>",
            x0 + 4.0,
            x1 - x0 - 8.0,
            frame.y(0.0) - top,
            html(&label),
            bin.count,
            top - 3.0,
            bin.count
        );
    }
    frame.axes(&mut out, "|dp| (log-scale bins: decades)", "options");
    out.push_str("</svg>\n");
    out
}

fn bin_label(lo: f64, hi: f64) -> String {
    if hi == 0.0 {
        "0".into()
    } else if lo == 0.0 {
        format!("≤{}", format::edge(hi))
    } else {
        format!("{}–{}", format::edge(lo), format::edge(hi))
    }
}

/// 1, 2 or 5 × 10^k, so that there are at most five ticks up to `max`.
fn tick_step(max: usize) -> usize {
    let mut magnitude = 1;
    loop {
        for factor in [1, 2, 5] {
            let step = factor * magnitude;
            if max <= 5 * step {
                return step;
            }
        }
        magnitude *= 10;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_and_labels() {
        assert_eq!(tick_step(0), 1);
        assert_eq!(tick_step(5), 1);
        assert_eq!(tick_step(6), 2);
        assert_eq!(tick_step(11), 5);
        assert_eq!(tick_step(1234), 500);
        assert_eq!(bin_label(0.0, 0.0), "0");
        assert_eq!(bin_label(0.0, 1e-6), "≤1e-6");
        assert_eq!(bin_label(1e-3, 1e-2), "1e-3–1e-2");
        assert_eq!(bin_label(0.01, 0.1), "1e-2–0.1");
        assert_eq!(bin_label(0.1, 1.0), "0.1–1");
    }
}
