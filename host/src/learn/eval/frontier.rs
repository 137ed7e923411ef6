//! The frontier ratio: what a correction is worth against spending the
//! same device instructions on the plain coarse step instead.
//!
//! For a horizon of `k` frames from a scene's own start, a column's error is
//! the mean of its per-frame position RMSE over frames 1..=k (all frames
//! when a rollout is shorter). The plain columns (every column that runs no
//! network: other time steps, BDF2, the calibrated membrane, a finer mesh)
//! are points (device instructions per frame, error); their lower
//! envelope, piecewise linear in cost, is the best a user gets from the
//! plain step at a given budget. A column's frontier ratio is its error
//! over that envelope at its own cost; a column cheaper than every plain
//! point is held against the cheapest. Below 1, the network buys more
//! accuracy than the same instructions spent on the plain step.

use crate::learn::eval::columns::Column;

/// The horizons of the frontier ratio, in frames from the scene's start.
pub const FRONTIER_HORIZONS: [usize; 3] = [10, 50, 200];

/// The mean of the first `k` of `per_frame` (all of them when fewer; NaN
/// when there are none).
pub fn window_mean(per_frame: &[f32], k: usize) -> f64 {
    let w = &per_frame[..k.min(per_frame.len())];
    w.iter().map(|&e| e as f64).sum::<f64>() / w.len() as f64
}

/// The lower envelope of `points` (cost, error) at `cost`: the lowest
/// error of a point no dearer than `cost`, or of a straight line between
/// two points whose costs enclose it; the cheapest point's error when every
/// point is dearer.
pub fn envelope(points: &[(f64, f64)], cost: f64) -> f64 {
    let cheapest = points.iter().copied().min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut best = points.iter().filter(|p| p.0 <= cost).map(|p| p.1).fold(f64::INFINITY, f64::min);
    if best == f64::INFINITY {
        best = cheapest.map_or(f64::NAN, |p| p.1);
    }
    for &(c1, e1) in points {
        for &(c2, e2) in points {
            if c1 < cost && cost < c2 {
                best = best.min(e1 + (e2 - e1) * (cost - c1) / (c2 - c1));
            }
        }
    }
    best
}

/// One column as the frontier sees it: its device instructions per frame
/// and its per-frame errors.
#[derive(Clone, Copy, Debug)]
pub struct Point<'a> {
    pub column: Column,
    pub cost: f64,
    pub per_frame: &'a [f32],
}

/// `column`'s frontier ratio at each of [`FRONTIER_HORIZONS`] among
/// `points` (`None` when `column` is not among them or no plain column is).
pub fn ratios(points: &[Point], column: Column) -> Option<[f64; 3]> {
    let me = points.iter().find(|p| p.column == column)?;
    let plain: Vec<&Point> = points.iter().filter(|p| !p.column.corrected()).collect();
    if plain.is_empty() || me.per_frame.is_empty() {
        return None;
    }
    Some(FRONTIER_HORIZONS.map(|k| {
        let env: Vec<(f64, f64)> = plain.iter().map(|p| (p.cost, window_mean(p.per_frame, k))).collect();
        window_mean(me.per_frame, k) / envelope(&env, me.cost)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_envelope_interpolates_between_enclosing_points_and_takes_any_cheaper_one() {
        let pts = [(1.0, 1.0), (2.0, 0.5), (4.0, 0.4), (3.0, 0.9)];
        // Between (1, 1) and (2, 0.5): the line; (3, 0.9) is above it.
        assert!((envelope(&pts, 1.5) - 0.75).abs() < 1e-12);
        // At 3: the cheaper point (2, 0.5) beats every line through (3, 0.9).
        assert!((envelope(&pts, 3.0) - 0.45).abs() < 1e-12);
        // Dearer than every point: the best of them.
        assert_eq!(envelope(&pts, 10.0), 0.4);
        // Cheaper than every point: the cheapest.
        assert_eq!(envelope(&pts, 0.5), 1.0);
    }

    #[test]
    fn a_correction_that_halves_the_error_at_a_plain_steps_cost_has_ratio_one_half() {
        let plain = vec![0.02f32; 200];
        let dear = vec![0.01f32; 200];
        let net: Vec<f32> = (0..200).map(|f| if f < 10 { 0.01 } else { 0.02 }).collect();
        let points = [
            Point { column: Column::Plain, cost: 1.0, per_frame: &plain },
            Point { column: Column::QuarterDt, cost: 3.0, per_frame: &dear },
            Point { column: Column::Int8, cost: 1.0, per_frame: &net },
        ];
        let r = ratios(&points, Column::Int8).unwrap();
        assert!((r[0] - 0.5).abs() < 1e-9, "{r:?}");
        // Over 50 frames: (10 · 0.01 + 40 · 0.02) / 50 = 0.018 against 0.02.
        assert!((r[1] - 0.9).abs() < 1e-6, "{r:?}");
        // The network's own points never make the envelope.
        assert!(ratios(&points[2..], Column::Int8).is_none());
    }
}
