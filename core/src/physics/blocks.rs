//! The solve's 3×3 block terms in fused multiply-adds
//! ([`crate::math::fused`]; the order of each is the `Mat3` method it
//! names), for the solver's products and smoother and the multigrid's
//! coarse levels: on a Cortex-M4F with the `dsp` feature the `fpu`
//! module's `VFMA.F32`/`VFMS.F32` kernels, elsewhere the `Mat3` methods,
//! with the same bits.

#[cfg(not(all(feature = "dsp", target_arch = "arm", target_abi = "eabihf")))]
use crate::math::fused;
use crate::math::{Mat3, Vec3};

/// `o = D p` ([`Mat3::mul_vec_fused`]).
#[inline(always)]
pub fn diagonal_term(d: &Mat3, p: &Vec3, o: &mut Vec3) {
    #[cfg(all(feature = "dsp", target_arch = "arm", target_abi = "eabihf"))]
    crate::fpu::block_vec(bytemuck::cast_ref(d), bytemuck::cast_ref(p), bytemuck::cast_mut(o));
    #[cfg(not(all(feature = "dsp", target_arch = "arm", target_abi = "eabihf")))]
    {
        *o = d.mul_vec_fused(*p);
    }
}

/// `z += ω (D r)`: `D r` as [`Mat3::mul_vec_fused`], then added in fused
/// multiply-adds.
#[inline(always)]
pub fn smooth_term(d: &Mat3, r: &Vec3, omega: f32, z: &mut Vec3) {
    #[cfg(all(feature = "dsp", target_arch = "arm", target_abi = "eabihf"))]
    crate::fpu::smooth_term(bytemuck::cast_ref(d), bytemuck::cast_ref(r), omega, bytemuck::cast_mut(z));
    #[cfg(not(all(feature = "dsp", target_arch = "arm", target_abi = "eabihf")))]
    {
        let t = d.mul_vec_fused(*r);
        *z = Vec3::new(fused(t.x, omega, z.x), fused(t.y, omega, z.y), fused(t.z, omega, z.z));
    }
}

/// `oa += B pb`, `ob += Bᵀ pa` ([`Mat3::mul_vec_add`],
/// [`Mat3::tmul_vec_add`]).
#[inline(always)]
pub fn edge_terms(b: &Mat3, pa: &Vec3, pb: &Vec3, oa: &mut Vec3, ob: &mut Vec3) {
    #[cfg(all(feature = "dsp", target_arch = "arm", target_abi = "eabihf"))]
    crate::fpu::edge_pair(
        bytemuck::cast_ref(b),
        bytemuck::cast_ref(pa),
        bytemuck::cast_ref(pb),
        bytemuck::cast_mut(oa),
        bytemuck::cast_mut(ob),
    );
    #[cfg(not(all(feature = "dsp", target_arch = "arm", target_abi = "eabihf")))]
    {
        *oa = b.mul_vec_add(*pb, *oa);
        *ob = b.tmul_vec_add(*pa, *ob);
    }
}

/// `acc −= B v` in fused multiply-adds ([`Mat3::mul_vec_sub`]; the
/// Cortex-M4F's `VFMS.F32` kernel with the `dsp` feature).
#[inline(always)]
pub fn block_sub(b: &Mat3, v: &Vec3, acc: &mut Vec3) {
    #[cfg(all(feature = "dsp", target_arch = "arm", target_abi = "eabihf"))]
    crate::fpu::block_sub(bytemuck::cast_ref(b), bytemuck::cast_ref(v), bytemuck::cast_mut(acc));
    #[cfg(not(all(feature = "dsp", target_arch = "arm", target_abi = "eabihf")))]
    {
        *acc = b.mul_vec_sub(*v, *acc);
    }
}

/// `acc −= Bᵀ v` in fused multiply-adds ([`Mat3::tmul_vec_sub`]).
#[inline(always)]
pub fn tblock_sub(b: &Mat3, v: &Vec3, acc: &mut Vec3) {
    #[cfg(all(feature = "dsp", target_arch = "arm", target_abi = "eabihf"))]
    crate::fpu::tblock_sub(bytemuck::cast_ref(b), bytemuck::cast_ref(v), bytemuck::cast_mut(acc));
    #[cfg(not(all(feature = "dsp", target_arch = "arm", target_abi = "eabihf")))]
    {
        *acc = b.tmul_vec_sub(*v, *acc);
    }
}
