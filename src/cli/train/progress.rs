//! What a run shows while it trains and leaves behind: a progress bar (step, loss, tokens/s,
//! ETA) on a terminal, or a plain line every 10 steps when stderr is a file or a pipe; and
//! the loss curves as an SVG plot.

use std::io::IsTerminal;
use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;

use sesame::error::{Result, SesameError};

use crate::cli::write_atomic;

/// The run's progress display.
pub struct Progress {
    bar: Option<ProgressBar>,
    steps: u64,
    started: std::time::Instant,
    first_step: u64,
}

impl Progress {
    pub fn new(first_step: u64, steps: u64) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(steps).with_position(first_step);
            let style = ProgressStyle::with_template("{bar:30} step {pos}/{len}  {msg}  ETA {eta}").unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar
        });
        Progress { bar, steps, started: std::time::Instant::now(), first_step }
    }

    /// Step `step` (0-based) is done.
    pub fn step(&self, step: u64, loss: f32, lr: f32, tokens_per_s: f64) {
        let message = format!("loss {loss:.4}  lr {lr:.2e}  {tokens_per_s:.0} tokens/s");
        match &self.bar {
            Some(bar) => {
                bar.set_message(message);
                bar.set_position(step + 1);
            }
            None if step.is_multiple_of(10) || step + 1 == self.steps => {
                let elapsed = self.started.elapsed().as_secs_f64();
                let eta = elapsed / (step + 1 - self.first_step) as f64 * (self.steps - step - 1) as f64;
                eprintln!("step {}/{}  {message}  ETA {eta:.0} s", step + 1, self.steps);
            }
            None => {}
        }
    }

    /// A line printed above the bar (or plainly).
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}

/// The losses of a run so far: (step, training loss) and (step, held-out loss).
#[derive(Default)]
pub struct History {
    pub train: Vec<(u64, f32)>,
    pub eval: Vec<(u64, f32)>,
}

impl History {
    /// The losses in a step log (the JSONL of --log), for a resumed run.
    pub fn from_log(text: &str) -> History {
        let mut history = History::default();
        for value in text.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()) {
            let Some(step) = value["step"].as_u64() else { continue };
            if let Some(loss) = value["loss"].as_f64() {
                history.train.push((step, loss as f32));
            }
            if let Some(loss) = value["eval_loss"].as_f64() {
                history.eval.push((step, loss as f32));
            }
        }
        history
    }

    /// Writes the loss curves to `path` as SVG: the training loss of every step (faint), its
    /// moving average over 1% of the run, and the held-out loss at each evaluation.
    pub fn write_svg(&self, path: &Path, title: &str) -> Result<()> {
        let Some(&(last_step, _)) = self.train.last() else { return Ok(()) };
        let mut svg = String::new();
        draw(&mut svg, title, &self.train, &moving_average(&self.train, (self.train.len() / 100).max(1)), &self.eval, last_step)
            .map_err(|e| SesameError::Io(format!("loss plot: {e}")))?;
        write_atomic(path, svg.as_bytes())
    }
}

/// The mean of each point's `window` latest losses.
fn moving_average(points: &[(u64, f32)], window: usize) -> Vec<(u64, f32)> {
    points
        .iter()
        .enumerate()
        .map(|(i, &(step, _))| {
            let span = &points[i + 1 - window.min(i + 1)..=i];
            (step, span.iter().map(|p| p.1).sum::<f32>() / span.len() as f32)
        })
        .collect()
}

fn draw(
    svg: &mut String,
    title: &str,
    train: &[(u64, f32)],
    smoothed: &[(u64, f32)],
    eval: &[(u64, f32)],
    last_step: u64,
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let finite = train.iter().chain(eval).map(|p| p.1).filter(|l| l.is_finite());
    let (low, high) = finite.fold((f32::MAX, f32::MIN), |(lo, hi), l| (lo.min(l), hi.max(l)));
    let margin = ((high - low) * 0.05).max(1e-3);
    let root = SVGBackend::with_string(svg, (800, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(0..last_step + 1, (low - margin)..(high + margin))?;
    chart.configure_mesh().x_desc("step").y_desc("loss (nats)").draw()?;
    chart.draw_series(LineSeries::new(train.iter().map(|&(s, l)| (s + 1, l)), BLUE.mix(0.25)))?;
    chart
        .draw_series(LineSeries::new(smoothed.iter().map(|&(s, l)| (s + 1, l)), BLUE.stroke_width(2)))?
        .label("training loss (moving average)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLUE.stroke_width(2)));
    if !eval.is_empty() {
        let points = eval.iter().map(|&(s, l)| (s + 1, l));
        chart
            .draw_series(LineSeries::new(points.clone(), RED.stroke_width(2)))?
            .label("held-out loss")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], RED.stroke_width(2)));
        chart.draw_series(points.map(|p| Circle::new(p, 3, RED.filled())))?;
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_reads_a_log_and_plots_it() {
        let log = "{\"step\":0,\"loss\":4.2,\"lr\":0.001}\n{\"step\":1,\"loss\":3.9}\n{\"step\":1,\"eval_loss\":4.0}\n{\"step\":2,\"loss\":3.5}\n";
        let history = History::from_log(log);
        assert_eq!(history.train, vec![(0, 4.2), (1, 3.9), (2, 3.5)]);
        assert_eq!(history.eval, vec![(1, 4.0)]);
        assert_eq!(moving_average(&history.train, 2), vec![(0, 4.2), (1, 4.05), (2, 3.7)]);
        let path = std::env::temp_dir().join(format!("sesame-plot-{}.svg", std::process::id()));
        history.write_svg(&path, "test run").unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("held-out loss") && svg.contains("test run"), "{svg}");
        std::fs::remove_file(&path).unwrap();
    }
}
