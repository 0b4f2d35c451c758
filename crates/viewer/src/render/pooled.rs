//! The coarse copy of a study's textures that the 3D view turns with on a software adapter:
//! each texel the brightest HU of a block of the display texture, and the label of the
//! block that matters most (a lesion before an organ, so a small lesion never vanishes).
//! Built on the CPU once per study (and per box a brush stroke touches), small enough that a
//! software renderer casts its rays at a few frames a second.
//!
//! Knows volumes and labels; nothing of egui.

use wgpu::util::DeviceExt;

use super::{LABEL_COLOURS, VolumeTextures, display_values, texture_3d, write_box};
use keyslice_core::volume::{LabelVolume, Volume};

/// The longest side of the coarse copy, texels.
pub const POOLED_SIDE: usize = 128;

/// The block size along each axis that brings `texture_dims` within `side` texels.
#[must_use]
pub fn pool_factors(texture_dims: [usize; 3], side: usize) -> [usize; 3] {
    texture_dims.map(|size| size.div_ceil(side.max(1)).max(1))
}

/// The coarse grid's dimensions.
#[must_use]
pub fn pooled_dims(texture_dims: [usize; 3], factor: [usize; 3]) -> [usize; 3] {
    std::array::from_fn(|a| texture_dims[a].div_ceil(factor[a].max(1)))
}

/// The brightest value of each `factor` block of `values` (`dims`, x fastest).
#[must_use]
pub fn max_pool(values: &[i16], dims: [usize; 3], factor: [usize; 3]) -> Vec<i16> {
    let coarse = pooled_dims(dims, factor);
    let mut out = vec![i16::MIN; coarse.iter().product()];
    if values.len() != dims.iter().product::<usize>() {
        return out;
    }
    for z in 0..dims[2] {
        let cz = z / factor[2];
        for y in 0..dims[1] {
            let cy = y / factor[1];
            let row = &values[dims[0] * (y + dims[1] * z)..][..dims[0]];
            let out_row = &mut out[coarse[0] * (cy + coarse[1] * cz)..][..coarse[0]];
            for (chunk, pooled) in row.chunks(factor[0]).zip(out_row.iter_mut()) {
                let brightest = chunk.iter().copied().max().unwrap_or(i16::MIN);
                *pooled = (*pooled).max(brightest);
            }
        }
    }
    out
}

/// How much a label matters in a block: lesions (9–11, and drawn masks, 15) before organs.
fn rank(label: u8) -> u16 {
    if matches!(label, 9..=11 | 15) {
        256 + u16::from(label)
    } else {
        u16::from(label)
    }
}

/// The labels of the coarse texels `min..=max` (coarse indices), each from its block of
/// `labels` on the volume's grid; `total` is volume voxels per coarse texel along each axis.
/// Returned x fastest over the box.
#[must_use]
pub fn pool_labels_box(
    labels: &LabelVolume,
    total: [usize; 3],
    min: [usize; 3],
    max: [usize; 3],
) -> Vec<u8> {
    let dims = labels.dims;
    let extent: [usize; 3] = std::array::from_fn(|a| max[a].saturating_sub(min[a]) + 1);
    let mut out = vec![0u8; extent.iter().product()];
    if labels.labels.len() != dims.iter().product::<usize>() {
        return out;
    }
    for z in min[2] * total[2]..((max[2] + 1) * total[2]).min(dims[2]) {
        let oz = z / total[2] - min[2];
        for y in min[1] * total[1]..((max[1] + 1) * total[1]).min(dims[1]) {
            let oy = y / total[1] - min[1];
            let first = min[0] * total[0];
            let last = ((max[0] + 1) * total[0]).min(dims[0]);
            if first >= last {
                continue;
            }
            let row = &labels.labels[dims[0] * (y + dims[1] * z)..][first..last];
            let out_row = &mut out[extent[0] * (oy + extent[1] * oz)..][..extent[0]];
            for (chunk, pooled) in row.chunks(total[0]).zip(out_row.iter_mut()) {
                for &label in chunk {
                    if rank(label) > rank(*pooled) {
                        *pooled = label;
                    }
                }
            }
        }
    }
    out
}

/// The coarse copy of `fine` (the study's textures of `volume`, with `labels`) within `side`
/// texels a side ([`POOLED_SIDE`] in the viewer), or `None` when `fine` is that small already.
#[must_use]
pub fn upload_pooled(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    volume: &Volume,
    fine: &VolumeTextures,
    labels: Option<&LabelVolume>,
    side: usize,
) -> Option<VolumeTextures> {
    let factor = pool_factors(fine.texture_dims, side);
    if factor == [1, 1, 1] {
        return None;
    }
    let coarse = pooled_dims(fine.texture_dims, factor);
    let hu = display_values(
        volume.voxels(),
        volume.dims(),
        fine.step,
        fine.texture_dims,
        &mut Vec::new(),
    );
    let pooled = max_pool(&hu, fine.texture_dims, factor);
    drop(hu);
    let texture = texture_3d(
        device,
        queue,
        "keyslice pooled volume (HU, R16Sint)",
        coarse,
        wgpu::TextureFormat::R16Sint,
        bytemuck::cast_slice(&pooled),
    );
    let step = std::array::from_fn(|a| fine.step[a] * factor[a]);
    let (labels_texture, labels_view) = pooled_labels(device, queue, step, coarse, labels);
    Some(VolumeTextures {
        volume_view: texture.create_view(&wgpu::TextureViewDescriptor::default()),
        labels_view,
        labels_texture,
        colours: device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("keyslice label colours"),
            contents: bytemuck::cast_slice(&LABEL_COLOURS),
            usage: wgpu::BufferUsages::UNIFORM,
        }),
        texture_dims: coarse,
        step,
        notices: Vec::new(),
    })
}

/// Replaces the labels of the coarse copy (views made before must be recreated).
pub fn upload_pooled_labels(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    pooled: &mut VolumeTextures,
    labels: Option<&LabelVolume>,
) {
    (pooled.labels_texture, pooled.labels_view) =
        pooled_labels(device, queue, pooled.step, pooled.texture_dims, labels);
}

/// Rewrites the coarse texels over the box `min..=max` (volume voxels) of `labels`, in
/// place; `false` (nothing written) when the coarse copy holds no labels yet.
#[must_use]
pub fn write_pooled_labels_box(
    queue: &wgpu::Queue,
    pooled: &VolumeTextures,
    labels: &LabelVolume,
    min: [usize; 3],
    max: [usize; 3],
) -> bool {
    let size = pooled.labels_texture.size();
    let held = [
        size.width as usize,
        size.height as usize,
        size.depth_or_array_layers as usize,
    ];
    if held != pooled.texture_dims || (0..3).any(|a| min[a] > max[a] || max[a] >= labels.dims[a]) {
        return false;
    }
    let step = pooled.step;
    let low: [usize; 3] = std::array::from_fn(|a| min[a] / step[a]);
    let high: [usize; 3] = std::array::from_fn(|a| (max[a] / step[a]).min(held[a] - 1));
    let data = pool_labels_box(labels, step, low, high);
    let box_extent: [usize; 3] = std::array::from_fn(|a| high[a] - low[a] + 1);
    write_box(queue, &pooled.labels_texture, &data, low, box_extent);
    true
}

/// The coarse label texture (one empty texel without labels, as for the full one).
fn pooled_labels(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    step: [usize; 3],
    coarse: [usize; 3],
    labels: Option<&LabelVolume>,
) -> (wgpu::Texture, wgpu::TextureView) {
    let (data, size) = match labels {
        Some(labels) => (
            pool_labels_box(labels, step, [0; 3], std::array::from_fn(|a| coarse[a] - 1)),
            coarse,
        ),
        None => (vec![0], [1, 1, 1]),
    };
    let texture = texture_3d(
        device,
        queue,
        "keyslice pooled labels (R8Uint)",
        size,
        wgpu::TextureFormat::R8Uint,
        &data,
    );
    let view = texture.create_view(&wgpu::TextureViewDescriptor::default());
    (texture, view)
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyslice_core::volume::Affine;

    #[test]
    fn each_coarse_texel_keeps_the_brightest_value_of_its_block() {
        let dims = [5, 4, 3];
        let mut values = vec![0i16; 60];
        values[4 + 5 * (3 + 4 * 2)] = 900; // the last voxel, alone in its block
        values[1] = -5;
        values[2 + 5] = 40; // (2, 1, 0)
        let factor = pool_factors(dims, 2);
        assert_eq!(factor, [3, 2, 2]);
        let pooled = max_pool(&values, dims, factor);
        assert_eq!(pooled_dims(dims, factor), [2, 2, 2]);
        assert_eq!(pooled, vec![40, 0, 0, 0, 0, 0, 0, 900]);
    }

    #[test]
    fn a_lesion_voxel_outranks_the_organ_around_it() {
        let dims = [4, 4, 4];
        let mut labels = vec![1u8; 64];
        labels[3 + 4 * (3 + 4 * 3)] = 9;
        labels[0] = 5;
        let volume = LabelVolume {
            name: "labels".into(),
            dims,
            patient_from_voxel: Affine::IDENTITY,
            labels,
        };
        let all = pool_labels_box(&volume, [2, 2, 2], [0, 0, 0], [1, 1, 1]);
        assert_eq!(all, vec![5, 1, 1, 1, 1, 1, 1, 9]);
        // One texel of the box alone, as a brush stroke rewrites it.
        assert_eq!(
            pool_labels_box(&volume, [2, 2, 2], [1, 1, 1], [1, 1, 1]),
            vec![9]
        );
    }
}
