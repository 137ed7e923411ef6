//! The error measures every evaluation shares.

use weft_core::math::Vec3;

/// Position RMSE between two node sets.
pub fn rmse(a: &[Vec3], b: &[Vec3]) -> f32 {
    (a.iter().zip(b).map(|(p, q)| (*p - *q).norm2()).sum::<f32>() / a.len().max(1) as f32).sqrt()
}

/// Mean of `v` (0 when empty).
pub fn mean(v: &[f32]) -> f32 {
    v.iter().sum::<f32>() / v.len().max(1) as f32
}

/// Position RMSE per frame of a rollout `xs` (frame 0 the start) against
/// the reference's frames, from frame 1 on.
pub fn frame_errors(xs: &[Vec<Vec3>], reference: &[Vec<Vec3>]) -> Vec<f32> {
    xs.iter().zip(reference).skip(1).map(|(a, b)| rmse(a, b)).collect()
}

/// Mean of a rollout's per-frame errors (`frame_errors`) over `steps`
/// frames: a rollout that stopped early counts its last error for the
/// frames it did not reach (infinite when it reached none).
pub fn rollout_mean(mut errors: Vec<f32>, steps: usize) -> f32 {
    let last = errors.last().copied().unwrap_or(f32::INFINITY);
    errors.resize(steps, last);
    mean(&errors)
}
