//! The preview renderer draws the cloth where the camera sees it.
use weft_core::model::{Collider, Shape};
use weft_core::prelude::*;
use weft_host::sim::storage::VecMeshStorage;
use weft_host::view::render::{render, side_by_side, write_gif, Camera};

#[test]
fn cloth_and_collider_appear_in_the_image() {
    let grid = Grid::horizontal(4, 4, 1.0, 1.0, 0.0);
    let mut ms = VecMeshStorage::for_counts(grid.counts());
    let mesh = Mesh::grid(&grid, ms.storage()).unwrap();
    let cam = Camera { eye: Vec3::new(0.0, 2.0, 0.01), target: Vec3::ZERO, fov_y_deg: 60.0, width: 64, height: 48 };
    let blue = [0.0, 0.0, 255.0];
    let img = render(&cam, &mesh, mesh.rest(), &[], 0.0, blue);
    // Looking straight down on a 1 m square from 2 m: the centre is cloth,
    // the corners of the image are sky.
    let c = img.get_pixel(32, 24);
    assert!(c[2] > 100 && c[0] < 50, "centre {c:?}");
    let corner = img.get_pixel(0, 0);
    assert!(corner[0] > 150, "corner {corner:?}");
    // A sphere under a cloth moved aside is visible in the centre.
    let aside: Vec<Vec3> = mesh.rest().iter().map(|p| *p + Vec3::new(5.0, 0.0, 0.0)).collect();
    let ball = [Collider::new(Shape::Sphere { center: Vec3::new(0.0, -0.5, 0.0), radius: 0.3 })];
    let img2 = render(&cam, &mesh, &aside, &ball, 0.0, blue);
    let c2 = img2.get_pixel(32, 24);
    assert!(c2[0] > c2[2], "sphere colour expected at centre, got {c2:?}");
    let both = side_by_side(&[&img, &img2]);
    assert_eq!((both.width(), both.height()), (128, 48));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.gif");
    write_gif(&path, &[img, img2], 50).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..6], b"GIF89a");
}
