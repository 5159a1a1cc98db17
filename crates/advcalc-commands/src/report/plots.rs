//! The report's figures, drawn with plotters' SVG backend into strings (text as SVG `<text>`
//! elements in the page's sans-serif font; no font files are read).

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::{Error, Result};
use crate::numbers::{sig, sig_pct};

use super::strips::Strip;

/// One colour per variant (Okabe–Ito, readable by colour-blind readers and in grey print).
pub const PALETTE: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
];

/// Variant `i`'s colour.
pub fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// The colour as CSS `#rrggbb`.
pub fn css(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

const FONT: &str = "sans-serif";

/// plotters' SVG backend writes a font's size divided by 1.24 into `font-size`.
const SVG_FONT_SCALE: f64 = 1.24;

/// Text sizes, in SVG user units: figures are drawn at the width the page shows them (at most
/// the page's column, 1080 px; see `page::parts::WIDTH`), so a unit is a CSS pixel and these
/// are the sizes a reader sees, next to the page's 15–16 px text. Nothing is drawn below
/// `SMALL`.
pub const SMALL: f64 = 13.0;
const LABEL: f64 = 14.0;
const TITLE: f64 = 15.0;

/// The page's font at `px` rendered pixels.
fn font(px: f64) -> FontDesc<'static> {
    (FONT, px * SVG_FONT_SCALE).into_font()
}

fn drawing<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> Error {
    Error::data("cannot draw the report's figures")
        .with_source(std::io::Error::other(e.to_string()))
}

/// Draw into an SVG string of `size` pixels.
fn svg(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<()>,
) -> Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        root.fill(&WHITE).map_err(drawing)?;
        draw(&root)?;
        root.present().map_err(drawing)?;
    }
    Ok(out)
}

/// One plotted line with its label and colour; `None` values leave a gap.
pub struct Series {
    pub label: String,
    pub colour: RGBColor,
    pub points: Vec<(f64, Option<f64>)>,
}

/// A padded range around the values (a unit range around a single value).
fn range(values: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if from_zero {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    if hi - lo < 1e-12 {
        let pad = if hi.abs() > 0.0 { hi.abs() * 0.5 } else { 0.5 };
        // a constant 0 (a share nobody has): the axis still starts at 0, never below
        if from_zero && lo >= 0.0 {
            return (0.0, hi + 2.0 * pad);
        }
        return (lo - pad, hi + pad);
    }
    let pad = (hi - lo) * 0.06;
    (
        if from_zero && lo >= 0.0 {
            0.0
        } else {
            lo - pad
        },
        hi + pad,
    )
}

/// A horizontal reference line across a line chart (a threshold), dashed, with its label.
pub struct Reference {
    pub y: f64,
    pub label: String,
}

/// What a line chart shows besides its lines.
pub struct Axes<'a> {
    pub title: &'a str,
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    /// The x range; `None`: the points' (padded).
    pub x_range: Option<(f64, f64)>,
    /// Label whole x values only (steps).
    pub integer_x: bool,
    /// The values are fractions, labelled as percentages (as the page's tables show them).
    pub percent: bool,
    /// The y axis starts at 0 (or ends there, for negative values).
    pub from_zero: bool,
    /// Horizontal lines drawn under the series; the y range includes them.
    pub references: &'a [Reference],
}

/// The colour of reference lines and marks.
pub const REFERENCE: RGBColor = RGBColor(90, 90, 90);

/// Lines over a shared x axis (steps, pass rates); the page writes their legend beside the
/// figure, where it never hides a line.
pub fn lines(axes: &Axes<'_>, series: &[Series], size: (u32, u32)) -> Result<String> {
    let (x0, x1) = axes.x_range.unwrap_or_else(|| {
        range(
            series.iter().flat_map(|s| s.points.iter().map(|p| p.0)),
            false,
        )
    });
    let (y0, mut y1) = range(
        series
            .iter()
            .flat_map(|s| s.points.iter().filter_map(|p| p.1))
            .chain(axes.references.iter().map(|r| r.y)),
        axes.from_zero,
    );
    if !axes.references.is_empty() {
        // room above the top line for its label
        y1 += (y1 - y0) * 0.12;
    }
    let integer_x = axes.integer_x;
    // whole steps: no more ticks than steps (plotters would add fractional ones)
    let x_labels = if integer_x {
        ((x1 - x0).floor() as usize + 1).clamp(2, 8)
    } else {
        8
    };
    svg(size, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(axes.title, font(TITLE))
            .margin(8)
            .margin_right(14)
            .x_label_area_size(if axes.x_desc.is_empty() { 26 } else { 46 })
            .y_label_area_size(if axes.y_desc.is_empty() { 58 } else { 80 })
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(drawing)?;
        let whole = |x: &f64| {
            if !integer_x {
                sig(*x)
            } else if (x - x.round()).abs() < 1e-9 {
                format!("{}", x.round() as i64)
            } else {
                String::new()
            }
        };
        // a tick a rounding step away from 0 is 0 (plotters' ticks of a span around 0 land
        // at ±5.6e-17, which would print as such)
        let y_label = |y: &f64| {
            let y = if y.abs() < (y1 - y0) * 1e-9 { 0.0 } else { *y };
            if axes.percent { sig_pct(y) } else { sig(y) }
        };
        chart
            .configure_mesh()
            .x_desc(axes.x_desc)
            .y_desc(axes.y_desc)
            .x_label_formatter(&whole)
            .y_label_formatter(&y_label)
            .x_labels(x_labels)
            .y_labels(5)
            .light_line_style(WHITE)
            .bold_line_style(RGBColor(225, 225, 225))
            .label_style(font(SMALL))
            .axis_desc_style(font(SMALL))
            .draw()
            .map_err(drawing)?;
        for s in series {
            let style = ShapeStyle::from(&s.colour).stroke_width(2);
            let mut segment: Vec<(f64, f64)> = Vec::new();
            let mut segments = Vec::new();
            for &(x, y) in &s.points {
                match y {
                    Some(y) if y.is_finite() => segment.push((x, y)),
                    _ => segments.push(std::mem::take(&mut segment)),
                }
            }
            segments.push(segment);
            for seg in segments.into_iter().filter(|s| !s.is_empty()) {
                let colour = s.colour;
                chart
                    .draw_series(LineSeries::new(seg.clone(), style))
                    .map_err(drawing)?;
                chart
                    .draw_series(seg.iter().map(|&p| Circle::new(p, 3, colour.filled())))
                    .map_err(drawing)?;
            }
        }
        // over the series: a line that a series lies on (a saturated maximum) stays visible
        for r in axes.references {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(x0, r.y), (x1, r.y)],
                    7,
                    5,
                    ShapeStyle::from(&REFERENCE).stroke_width(2),
                ))
                .map_err(drawing)?;
            if !r.label.is_empty() {
                let (x, y) = chart.backend_coord(&(x1, r.y));
                root.draw(&Text::new(
                    r.label.clone(),
                    (x - 4, y - 5),
                    font(SMALL)
                        .color(&REFERENCE)
                        .pos(Pos::new(HPos::Right, VPos::Bottom)),
                ))
                .map_err(drawing)?;
            }
        }
        Ok(())
    })
}

/// A histogram panel: its label, colour and the fraction of its values in each bin.
pub struct Panel {
    pub label: String,
    pub colour: RGBColor,
    pub fractions: Vec<f64>,
}

/// Histograms stacked over one shared x axis [lo, hi] and one shared y axis, with optional
/// vertical marks (`(x, label)`: e.g. 0, or a threshold).
pub fn histograms(
    x_desc: &str,
    lo: f64,
    hi: f64,
    panels: &[Panel],
    marks: &[(f64, String)],
    width: u32,
) -> Result<String> {
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        (lo - 0.5, hi + 0.5)
    };
    let ymax = panels
        .iter()
        .flat_map(|p| p.fractions.iter().copied())
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.08;
    // every panel's plot the same height: the last one's area adds its x axis
    let (panel, axis) = (140u32, 46u32);
    let height = panel * panels.len() as u32 + axis - 14;
    svg((width, height), |root| {
        let breaks: Vec<i32> = (1..panels.len())
            .map(|k| (k as u32 * panel) as i32)
            .collect();
        let areas = root.split_by_breakpoints::<i32, i32, [i32; 0], _>([], breaks);
        for (k, (area, p)) in areas.iter().zip(panels).enumerate() {
            let last = k + 1 == panels.len();
            let mut chart = ChartBuilder::on(area)
                .margin_top(6)
                .margin_right(14)
                .x_label_area_size(if last { 46 } else { 14 })
                .y_label_area_size(80)
                .build_cartesian_2d(lo..hi, 0.0..ymax)
                .map_err(drawing)?;
            let mut mesh = chart.configure_mesh();
            mesh.y_desc("share of tokens")
                .y_label_formatter(&|y| sig_pct(*y))
                .y_labels(4)
                .x_labels(10)
                .light_line_style(WHITE)
                .bold_line_style(RGBColor(230, 230, 230))
                .label_style(font(SMALL))
                .axis_desc_style(font(SMALL));
            if last {
                mesh.x_desc(x_desc);
            } else {
                mesh.x_label_formatter(&|_| String::new());
            }
            mesh.draw().map_err(drawing)?;
            let bins = p.fractions.len().max(1);
            let w = (hi - lo) / bins as f64;
            chart
                .draw_series(
                    p.fractions
                        .iter()
                        .enumerate()
                        .filter(|(_, f)| **f > 0.0)
                        .map(|(i, &f)| {
                            let x = lo + i as f64 * w;
                            Rectangle::new([(x, 0.0), (x + w, f)], p.colour.mix(0.85).filled())
                        }),
                )
                .map_err(drawing)?;
            for (x, label) in marks {
                if *x >= lo && *x <= hi {
                    chart
                        .draw_series(LineSeries::new(
                            vec![(*x, 0.0), (*x, ymax)],
                            ShapeStyle::from(&REFERENCE).stroke_width(1),
                        ))
                        .map_err(drawing)?;
                    if k == 0 && !label.is_empty() {
                        chart
                            .draw_series(std::iter::once(Text::new(
                                label.clone(),
                                (*x, ymax * 0.97),
                                font(SMALL).color(&REFERENCE),
                            )))
                            .map_err(drawing)?;
                    }
                }
            }
            chart
                .draw_series(std::iter::once(Text::new(
                    p.label.clone(),
                    (lo + (hi - lo) * 0.01, ymax * 0.97),
                    font(LABEL).style(FontStyle::Bold).color(&p.colour),
                )))
                .map_err(drawing)?;
        }
        Ok(())
    })
}

/// Horizontal bars (label, fraction in [0, 1]) with the value printed after each bar.
pub fn bars(title: &str, items: &[(String, f64)], width: u32) -> Result<String> {
    let row = 30u32;
    let height = 40 + row * items.len() as u32 + 30;
    let xmax = items.iter().map(|i| i.1).fold(0.0f64, f64::max).max(1e-6) * 1.25;
    svg((width, height), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, font(TITLE))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(200)
            .build_cartesian_2d(0.0..xmax, 0.0..items.len() as f64)
            .map_err(drawing)?;
        let labels: Vec<String> = items.iter().map(|i| i.0.clone()).collect();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .light_line_style(WHITE)
            .bold_line_style(RGBColor(230, 230, 230))
            .y_labels(items.len() * 2 + 1)
            .y_label_formatter(&|y| {
                let k = y - 0.5;
                let i = k.round();
                if (k - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < labels.len() {
                    labels[labels.len() - 1 - i as usize].clone()
                } else {
                    String::new()
                }
            })
            .x_label_formatter(&|x| sig_pct(*x))
            .label_style(font(SMALL))
            .draw()
            .map_err(drawing)?;
        let n = items.len();
        chart
            .draw_series(items.iter().enumerate().map(|(i, (_, v))| {
                let y = (n - 1 - i) as f64;
                Rectangle::new(
                    [(0.0, y + 0.2), (*v, y + 0.8)],
                    colour(1).mix(0.85).filled(),
                )
            }))
            .map_err(drawing)?;
        chart
            .draw_series(items.iter().enumerate().map(|(i, (_, v))| {
                let y = (n - 1 - i) as f64;
                Text::new(
                    sig_pct(*v),
                    (*v + xmax * 0.01, y + 0.5),
                    font(SMALL)
                        .color(&BLACK)
                        .pos(Pos::new(HPos::Left, VPos::Center)),
                )
            }))
            .map_err(drawing)?;
        Ok(())
    })
}

/// A diverging colour for `a` on a scale of ±`scale`: red below 0, white at 0, blue above
/// (ColorBrewer RdBu).
pub fn diverging(a: f64, scale: f64) -> RGBColor {
    let t = if scale > 0.0 {
        (a / scale).clamp(-1.0, 1.0)
    } else {
        0.0
    };
    let (end, t) = if t < 0.0 {
        ((178.0, 24.0, 43.0), -t)
    } else {
        ((33.0, 102.0, 172.0), t)
    };
    let mix = |e: f64| (255.0 + (e - 255.0) * t).round() as u8;
    RGBColor(mix(end.0), mix(end.1), mix(end.2))
}

/// Tool tokens (input mask 0) and rejected tokens (mask 1 → 0 by rejection).
pub const TOOL: RGBColor = RGBColor(222, 222, 222);
pub const REJECTED: RGBColor = RGBColor(120, 120, 120);

/// The largest |advantage| over a strip's valid tokens under any variant: its colour scale.
pub fn strip_scale(strip: &Strip) -> f64 {
    strip
        .variants
        .iter()
        .flat_map(|(a, m)| {
            a.iter()
                .zip(m)
                .filter(|(_, m)| **m == 1.0)
                .map(|(a, _)| a.abs() as f64)
        })
        .fold(0.0, f64::max)
}

/// One row's tokens as cells, one block of lines per variant, coloured by advantage on a
/// shared diverging scale, tool tokens shaded, rejected tokens dark, the reward position
/// marked with a triangle; a colour bar at the bottom.
pub fn strip(strip: &Strip, labels: &[String], width: u32) -> Result<String> {
    let n = strip.mask.len().max(1);
    let left = 120u32;
    let avail = width - left - 12;
    let per_line = (avail as usize / 4).min(n).max(1);
    let cell_w = (avail as f64 / per_line as f64).min(18.0);
    let cell_h = 12.0;
    let lines = n.div_ceil(per_line);
    let block = lines as f64 * (cell_h + 3.0) + 14.0;
    let height = (block * labels.len() as f64 + 58.0).ceil() as u32;
    let scale = strip_scale(strip);
    svg((width, height), |root| {
        let text = font(SMALL);
        for (v, label) in labels.iter().enumerate() {
            let (adv, mask) = &strip.variants[v];
            let top = 8.0 + v as f64 * block;
            root.draw(&Text::new(
                label.clone(),
                (6, (top + cell_h / 2.0) as i32),
                text.clone()
                    .style(FontStyle::Bold)
                    .color(&colour(v))
                    .pos(Pos::new(HPos::Left, VPos::Center)),
            ))
            .map_err(drawing)?;
            let fill_of = |t: usize| {
                if strip.mask[t] == 0.0 {
                    TOOL
                } else if mask[t] == 0.0 {
                    REJECTED
                } else {
                    diverging(adv[t] as f64, scale)
                }
            };
            let at = |t: usize| {
                let (line, col) = (t / per_line, t % per_line);
                (
                    left as f64 + col as f64 * cell_w,
                    top + line as f64 * (cell_h + 3.0),
                )
            };
            // a run of equal cells on one line is one rectangle: adjacent rectangles leave an
            // anti-aliasing hairline between them in a browser, however exactly they abut
            let mut t = 0;
            while t < strip.mask.len() {
                let fill = fill_of(t);
                let mut end = t + 1;
                while end < strip.mask.len() && end % per_line != 0 && fill_of(end) == fill {
                    end += 1;
                }
                let (x, y) = at(t);
                let x_end = at(end - 1).0 + cell_w;
                root.draw(&Rectangle::new(
                    [
                        (x.round() as i32, y.round() as i32),
                        (x_end.round() as i32, (y + cell_h).round() as i32),
                    ],
                    fill.filled(),
                ))
                .map_err(drawing)?;
                t = end;
            }
            for &t in &strip.reward_at {
                if t >= strip.mask.len() {
                    continue;
                }
                let (x, y) = at(t);
                let (cx, by) = (x + cell_w / 2.0, y + cell_h);
                root.draw(&Polygon::new(
                    vec![
                        (cx.round() as i32, (by - 3.0) as i32),
                        ((cx - 5.0) as i32, (by + 5.0) as i32),
                        ((cx + 5.0) as i32, (by + 5.0) as i32),
                    ],
                    BLACK.filled(),
                ))
                .map_err(drawing)?;
            }
        }
        // the colour bar: −scale … 0 … +scale, its numbers under it, then the shadings
        let y = (8.0 + labels.len() as f64 * block + 6.0) as i32;
        let steps = 21;
        let bar_w = 10;
        let middle = |x: i32, y: i32| (x, y + 6);
        root.draw(&Text::new(
            "advantage",
            middle(6, y),
            text.clone()
                .color(&BLACK)
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(drawing)?;
        for k in 0..steps {
            let a = scale * (2.0 * k as f64 / (steps - 1) as f64 - 1.0);
            let x = left as i32 + k * bar_w;
            root.draw(&Rectangle::new(
                [(x, y), (x + bar_w, y + 12)],
                diverging(a, scale).filled(),
            ))
            .map_err(drawing)?;
        }
        let end = left as i32 + steps * bar_w;
        // its ends' numbers, unless every advantage is 0 (only the middle's then)
        let mut ends = vec![(
            left as i32 + (steps / 2) * bar_w + bar_w / 2,
            "0".to_string(),
        )];
        if scale > 0.0 {
            ends.push((left as i32, sig(-scale)));
            ends.push((end, format!("+{}", sig(scale))));
        }
        for (x, label) in ends {
            root.draw(&Text::new(
                label,
                (x, y + 15),
                text.clone()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Top)),
            ))
            .map_err(drawing)?;
        }
        let mut x = end + 60;
        for (fill, label) in [(TOOL, "tool token"), (REJECTED, "rejected token")] {
            root.draw(&Rectangle::new([(x, y), (x + 12, y + 12)], fill.filled()))
                .map_err(drawing)?;
            root.draw(&Text::new(
                label,
                middle(x + 18, y),
                text.clone()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Left, VPos::Center)),
            ))
            .map_err(drawing)?;
            x += 150;
        }
        root.draw(&Polygon::new(
            vec![(x + 6, y + 1), (x + 1, y + 10), (x + 11, y + 10)],
            BLACK.filled(),
        ))
        .map_err(drawing)?;
        root.draw(&Text::new(
            "reward position",
            middle(x + 18, y),
            text.clone()
                .color(&BLACK)
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(drawing)?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diverging_scale_is_white_at_zero_and_saturates_at_the_ends() {
        assert_eq!(diverging(0.0, 1.0), RGBColor(255, 255, 255));
        assert_eq!(diverging(1.0, 1.0), RGBColor(33, 102, 172));
        assert_eq!(diverging(-5.0, 1.0), RGBColor(178, 24, 43));
        // half way to blue: 255 + (33 − 255)/2 = 144
        assert_eq!(diverging(0.5, 1.0).0, 144);
        assert_eq!(diverging(3.0, 0.0), RGBColor(255, 255, 255));
    }

    #[test]
    fn ranges_pad_and_start_at_zero_when_asked() {
        assert_eq!(range([2.0, 4.0].into_iter(), true).0, 0.0);
        let (lo, hi) = range([3.0].into_iter(), false);
        assert!(lo < 3.0 && hi > 3.0);
        assert_eq!(range(std::iter::empty(), false), (0.0, 1.0));
        // all zero from zero: 0 to 1, no negative shares
        assert_eq!(range([0.0, 0.0].into_iter(), true), (0.0, 1.0));
    }
}
