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
