//! GPU rendering of CT slices with wgpu.
//!
//! The volume is uploaded once as a 3D texture and never touched again by the CPU; label
//! masks go in a second 3D texture. Each view owns a 128-byte uniform buffer (its
//! viewport-uv → voxel map and window/level) and a bind group; scrolling, window/level and
//! zoom only rewrite that buffer. The slice is cut, interpolated and windowed in
//! `shaders/slice.wgsl`. Pipeline and layouts are built once per target format
//! ([`SliceRenderer`]); per-frame values are small plain structs ([`view::SliceView`]).
//!
//! **Texture format: `R16Sint`.** HU are exact integers from −32768 to 32767 in two bytes a
//! voxel. Integer textures cannot be filtered, so the shader does trilinear interpolation from
//! eight `textureLoad`s. The alternatives lose: `R16Float` rounds HU above 2048 (dense bone,
//! metal); `R16Unorm`/`R16Snorm` need the optional 16-bit-norm feature; `R32Float` doubles
//! memory and is not filterable everywhere either. `f32` volumes are rounded to whole HU for
//! display only (the CPU copy, used for HU read-outs, stays exact).
//!
//! A volume beyond the adapter's 3D texture size or the memory budget is downsampled (every
//! n-th voxel along the axis that is too long) for display, with a notice; never a crash.
//!
//! Knows volumes, labels and view geometry; knows nothing of egui, findings or inference.

pub mod canvas;
pub mod orbit;
pub mod pooled;
pub mod view;

use wgpu::util::DeviceExt;

use keyslice_core::volume::{LabelVolume, Volume, Voxels};
use view::{PlaneAxes, SliceView};

/// The slice shader source (after the shared full-viewport vertex stage).
pub const SLICE_SHADER: &str = concat!(
    include_str!("../../../../shaders/fullscreen.wgsl"),
    include_str!("../../../../shaders/slice.wgsl")
);
/// The 3D view's shader source (maximum intensity projection, same bindings).
pub const MIP_SHADER: &str = concat!(
    include_str!("../../../../shaders/fullscreen.wgsl"),
    include_str!("../../../../shaders/mip.wgsl")
);

/// Bytes of volume texture Keyslice allows itself before downsampling (1 GiB: 512 Mi voxels).
pub const TEXTURE_BUDGET_BYTES: u64 = 1 << 30;

/// Errors setting up rendering.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// No usable GPU adapter (not even a software one).
    #[error("no GPU adapter found: {0}")]
    NoAdapter(String),
    /// The adapter refused a device.
    #[error("the GPU adapter refused to create a device: {0}")]
    Device(String),
    /// Reading rendered pixels back failed.
    #[error("reading the rendered image back failed: {0}")]
    Readback(String),
}

impl RenderError {
    /// What a user can do about it.
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            Self::NoAdapter(_) | Self::Device(_) => {
                "install a Vulkan driver (on Debian/Ubuntu without a GPU: mesa-vulkan-drivers for the software renderer)"
            }
            Self::Readback(_) => "try again; if it persists, update the GPU driver",
        }
    }
}

/// Colours of labels 1–15 (index 0 unused): organs muted, lesions 9–11 bright, the masks a
/// reviewer draws (15) green.
pub const LABEL_COLOURS: [[f32; 4]; 16] = [
    [0.0, 0.0, 0.0, 0.0],
    [0.85, 0.35, 0.25, 1.0], // 1 liver
    [0.95, 0.75, 0.30, 1.0], // 2 pancreas
    [0.35, 0.55, 0.95, 1.0], // 3 left kidney
    [0.35, 0.80, 0.90, 1.0], // 4 right kidney
    [0.60, 0.40, 0.80, 1.0], // 5 spleen
    [0.50, 0.80, 0.40, 1.0],
    [0.80, 0.60, 0.60, 1.0],
    [0.60, 0.60, 0.80, 1.0],
    [1.00, 0.10, 0.10, 1.0], // 9 liver lesion
    [1.00, 0.00, 1.00, 1.0], // 10 pancreatic lesion
    [1.00, 1.00, 0.00, 1.0], // 11 kidney lesion
    [1.00, 1.00, 1.00, 1.0],
    [1.00, 0.50, 0.00, 1.0],
    [0.50, 1.00, 1.00, 1.0],
    [0.00, 1.00, 0.50, 1.0], // 15 lesion masks drawn in the viewer
];

/// The volume and label textures of one study, and how they relate to the volume's grid.
pub struct VolumeTextures {
    volume_view: wgpu::TextureView,
    labels_view: wgpu::TextureView,
    /// The label texture itself, for writing a box of it (a brush stroke).
    labels_texture: wgpu::Texture,
    colours: wgpu::Buffer,
    /// Texture dimensions (after any downsampling).
    pub texture_dims: [usize; 3],
    /// Volume voxels per texture voxel along each axis (1 unless downsampled).
    pub step: [usize; 3],
    /// What the user should be told (downsampling, rounding of float HU).
    pub notices: Vec<String>,
}

/// Picks the per-axis step so the texture fits the adapter's limit and the byte budget.
#[must_use]
pub fn downsample_steps(dims: [usize; 3], max_side: usize, budget_voxels: u64) -> [usize; 3] {
    let mut step = dims.map(|size| size.div_ceil(max_side.max(1)).max(1));
    let voxels = |step: [usize; 3]| -> u64 {
        (0..3)
            .map(|axis| dims[axis].div_ceil(step[axis]) as u64)
            .product()
    };
    while voxels(step) > budget_voxels {
        // Coarsen the axis with the most texture voxels.
        let axis = (0..3)
            .max_by_key(|&axis| dims[axis].div_ceil(step[axis]))
            .unwrap_or(0);
        step[axis] += 1;
    }
    step
}

/// The HU to upload: the volume's own `i16` values when no downsampling is needed (no copy),
/// otherwise every `step`-th voxel, with `f32` rounded to whole HU (noted for the user).
pub(crate) fn display_values<'a>(
    voxels: &'a Voxels,
    dims: [usize; 3],
    step: [usize; 3],
    texture_dims: [usize; 3],
    notices: &mut Vec<String>,
) -> std::borrow::Cow<'a, [i16]> {
    if let Voxels::I16(values) = voxels
        && step == [1, 1, 1]
    {
        return std::borrow::Cow::Borrowed(values);
    }
    let gather = |i: usize, j: usize, k: usize| {
        i * step[0] + dims[0] * (j * step[1] + dims[1] * k * step[2])
    };
    let mut clipped = false;
    let mut out = Vec::with_capacity(texture_dims.iter().product());
    for k in 0..texture_dims[2] {
        for j in 0..texture_dims[1] {
            for i in 0..texture_dims[0] {
                let source = gather(i, j, k);
                out.push(match voxels {
                    Voxels::I16(values) => values[source],
                    Voxels::F32(values) => {
                        let rounded = values[source].round();
                        clipped |= rounded < f32::from(i16::MIN) || rounded > f32::from(i16::MAX);
                        // In range after the clamp, so the cast is exact.
                        rounded.clamp(f32::from(i16::MIN), f32::from(i16::MAX)) as i16
                    }
                });
            }
        }
    }
    if matches!(voxels, Voxels::F32(_)) {
        notices.push(if clipped {
            "values beyond ±32767 are clipped for display".to_string()
        } else {
            "fractional values are rounded to whole units for display".to_string()
        });
    }
    std::borrow::Cow::Owned(out)
}

/// Uploads `volume` (and optionally labels already on its grid) to the GPU.
#[must_use]
pub fn upload_volume(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    volume: &Volume,
    labels: Option<&LabelVolume>,
) -> VolumeTextures {
    let dims = volume.dims();
    let max_side = device.limits().max_texture_dimension_3d as usize;
    let step = downsample_steps(dims, max_side, TEXTURE_BUDGET_BYTES / 2);
    let texture_dims = [0, 1, 2].map(|axis| dims[axis].div_ceil(step[axis]));
    let mut notices = Vec::new();
    if step != [1, 1, 1] {
        notices.push(format!(
            "the volume ({}×{}×{}) exceeds this GPU's 3D texture limit ({max_side} per side) or the display budget; shown downsampled to {}×{}×{} (measurements and HU read-outs still use every voxel)",
            dims[0], dims[1], dims[2], texture_dims[0], texture_dims[1], texture_dims[2]
        ));
    }
    let hu = display_values(volume.voxels(), dims, step, texture_dims, &mut notices);
    let size = wgpu::Extent3d {
        width: texture_dims[0] as u32,
        height: texture_dims[1] as u32,
        depth_or_array_layers: texture_dims[2] as u32,
    };
    let volume_texture = device.create_texture(&wgpu::TextureDescriptor {
        label: Some("keyslice volume (HU, R16Sint)"),
        size,
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D3,
        format: wgpu::TextureFormat::R16Sint,
        usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
        view_formats: &[],
    });
    upload_in_slabs(device, queue, &volume_texture, &hu, texture_dims);
    drop(hu);
    let (labels_texture, labels_view) =
        labels_texture_view(device, queue, dims, step, texture_dims, labels);
    let colours = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("keyslice label colours"),
        contents: bytemuck::cast_slice(&LABEL_COLOURS),
        usage: wgpu::BufferUsages::UNIFORM,
    });
    VolumeTextures {
        volume_view: volume_texture.create_view(&wgpu::TextureViewDescriptor::default()),
        labels_view,
        labels_texture,
        colours,
        texture_dims,
        step,
        notices,
    }
}

/// The most bytes staged for the GPU at once while a volume uploads.
const UPLOAD_SLAB_BYTES: usize = 32 << 20;

/// Writes `values` (`dims`, x fastest) into the 3D `texture` a slab of slices at a time, each
/// slab submitted and its staging memory released before the next: a whole CT is never
/// copied a second time in memory on its way to the GPU (on a software driver the texture
/// itself lives in the process, so a whole-volume staging copy would make three).
fn upload_in_slabs(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    texture: &wgpu::Texture,
    values: &[i16],
    dims: [usize; 3],
) {
    let slice_values = dims[0] * dims[1];
    let slab = (UPLOAD_SLAB_BYTES / (slice_values * 2).max(1)).max(1);
    let mut first = 0;
    while first < dims[2] {
        let count = slab.min(dims[2] - first);
        let data = &values[first * slice_values..(first + count) * slice_values];
        queue.write_texture(
            wgpu::TexelCopyTextureInfo {
                texture,
                mip_level: 0,
                origin: wgpu::Origin3d {
                    x: 0,
                    y: 0,
                    z: first as u32,
                },
                aspect: wgpu::TextureAspect::All,
            },
            bytemuck::cast_slice(data),
            wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(dims[0] as u32 * 2),
                rows_per_image: Some(dims[1] as u32),
            },
            wgpu::Extent3d {
                width: dims[0] as u32,
                height: dims[1] as u32,
                depth_or_array_layers: count as u32,
            },
        );
        queue.submit(std::iter::empty());
        // The slab's staging memory is freed once the copy is done.
        let _ = device.poll(wgpu::PollType::wait_indefinitely());
        first += count;
    }
}

/// Replaces the label texture of `textures` (masks that arrive after the volume is shown);
/// `dims` are the volume's. Views made before must be recreated to see it.
pub fn upload_labels(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    textures: &mut VolumeTextures,
    dims: [usize; 3],
    labels: Option<&LabelVolume>,
) {
    (textures.labels_texture, textures.labels_view) = labels_texture_view(
        device,
        queue,
        dims,
        textures.step,
        textures.texture_dims,
        labels,
    );
}

/// Writes the box `min..=max` (voxels of the volume) of `labels` into the label texture, in
/// place: a brush stroke uploads what it touched, not the CT's worth of labels. Returns
/// `false`, writing nothing, when the texture is not the labels' full-resolution copy (no
/// masks yet, or a downsampled volume): the caller then uploads the labels whole.
#[must_use]
pub fn write_labels_box(
    queue: &wgpu::Queue,
    textures: &VolumeTextures,
    labels: &LabelVolume,
    min: [usize; 3],
    max: [usize; 3],
) -> bool {
    let size = textures.labels_texture.size();
    let full = [
        size.width as usize,
        size.height as usize,
        size.depth_or_array_layers as usize,
    ];
    if textures.step != [1, 1, 1]
        || full != labels.dims
        || (0..3).any(|a| min[a] > max[a] || max[a] >= full[a])
    {
        return false;
    }
    let extent = [0, 1, 2].map(|a| max[a] - min[a] + 1);
    let [columns, rows, _] = labels.dims;
    let mut data = Vec::with_capacity(extent.iter().product());
    for z in min[2]..=max[2] {
        for y in min[1]..=max[1] {
            let start = min[0] + columns * (y + rows * z);
            data.extend_from_slice(&labels.labels[start..start + extent[0]]);
        }
    }
    write_box(queue, &textures.labels_texture, &data, min, extent);
    true
}

/// The extent of a 3D texture of `dims` texels.
fn extent_3d(dims: [usize; 3]) -> wgpu::Extent3d {
    wgpu::Extent3d {
        width: dims[0] as u32,
        height: dims[1] as u32,
        depth_or_array_layers: dims[2] as u32,
    }
}

/// A 3D texture of `dims` and one-byte-or-more texels of `format`, filled with `bytes`
/// (x fastest), to sample from and write boxes into.
fn texture_3d(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    label: &str,
    dims: [usize; 3],
    format: wgpu::TextureFormat,
    bytes: &[u8],
) -> wgpu::Texture {
    device.create_texture_with_data(
        queue,
        &wgpu::TextureDescriptor {
            label: Some(label),
            size: extent_3d(dims),
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D3,
            format,
            usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
            view_formats: &[],
        },
        wgpu::util::TextureDataOrder::LayerMajor,
        bytes,
    )
}

/// Writes `data` (one byte a texel, x fastest) into the box of `extent` texels at `origin`
/// of an `R8Uint` 3D `texture`.
fn write_box(
    queue: &wgpu::Queue,
    texture: &wgpu::Texture,
    data: &[u8],
    origin: [usize; 3],
    extent: [usize; 3],
) {
    queue.write_texture(
        wgpu::TexelCopyTextureInfo {
            texture,
            mip_level: 0,
            origin: wgpu::Origin3d {
                x: origin[0] as u32,
                y: origin[1] as u32,
                z: origin[2] as u32,
            },
            aspect: wgpu::TextureAspect::All,
        },
        data,
        wgpu::TexelCopyBufferLayout {
            offset: 0,
            bytes_per_row: Some(extent[0] as u32),
            rows_per_image: Some(extent[1] as u32),
        },
        extent_3d(extent),
    );
}

/// The `R8Uint` label texture on the (possibly downsampled) texture grid.
fn labels_texture_view(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    dims: [usize; 3],
    step: [usize; 3],
    texture_dims: [usize; 3],
    labels: Option<&LabelVolume>,
) -> (wgpu::Texture, wgpu::TextureView) {
    let gather = |index: [usize; 3]| {
        index[0] * step[0] + dims[0] * (index[1] * step[1] + dims[1] * index[2] * step[2])
    };
    let texture_count = texture_dims.iter().product::<usize>();
    // Without masks a single empty voxel stands in (the shader clamps to the texture's size).
    let (label_values, label_size): (std::borrow::Cow<[u8]>, [usize; 3]) = match labels {
        Some(labels) if labels.dims == dims && step == [1, 1, 1] => {
            (std::borrow::Cow::Borrowed(&labels.labels), texture_dims)
        }
        Some(labels) if labels.dims == dims => (
            std::borrow::Cow::Owned(
                (0..texture_count)
                    .map(|n| {
                        let i = n % texture_dims[0];
                        let j = (n / texture_dims[0]) % texture_dims[1];
                        let k = n / (texture_dims[0] * texture_dims[1]);
                        labels.labels[gather([i, j, k])]
                    })
                    .collect(),
            ),
            texture_dims,
        ),
        _ => (std::borrow::Cow::Owned(vec![0]), [1, 1, 1]),
    };
    let texture = texture_3d(
        device,
        queue,
        "keyslice labels (R8Uint)",
        label_size,
        wgpu::TextureFormat::R8Uint,
        &label_values,
    );
    let view = texture.create_view(&wgpu::TextureViewDescriptor::default());
    (texture, view)
}

/// What the shader's `View` uniform holds (see `shaders/slice.wgsl`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ViewUniforms {
    /// Viewport uv → texture voxel, column-major.
    pub voxel_from_uv: [[f32; 4]; 4],
    /// Window centre, width, invert flag, mask opacity.
    pub window: [f32; 4],
    /// Texture dimensions, number of label colours.
    pub dims: [f32; 4],
    /// `[bitmask of shown labels, 0, 0, 0]`.
    pub visible_labels: [u32; 4],
}

/// What a view needs besides its [`SliceView`] to become [`ViewUniforms`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ViewGeometry {
    /// How the plane maps onto voxel axes.
    pub axes: PlaneAxes,
    /// Volume dimensions.
    pub dims: [usize; 3],
    /// Volume spacing in mm.
    pub spacing_mm: [f64; 3],
    /// Viewport size in pixels.
    pub viewport_px: [f64; 2],
    /// MONOCHROME1: show low values bright.
    pub inverted: bool,
    /// Label overlay opacity.
    pub mask_opacity: f32,
    /// Bit `n` set: label `n` is drawn.
    pub visible_labels: u32,
}

impl ViewUniforms {
    /// The uniforms for `view`, mapped onto the texture grid of `step`/`texture_dims`.
    #[must_use]
    pub fn for_texture(
        view: &SliceView,
        geometry: &ViewGeometry,
        step: [usize; 3],
        texture_dims: [usize; 3],
    ) -> Self {
        let mut voxel_from_uv = view.voxel_from_uv(
            geometry.axes,
            geometry.dims,
            geometry.spacing_mm,
            geometry.viewport_px,
        );
        // Volume voxel → texture voxel: divide by the step along each axis.
        for column in &mut voxel_from_uv {
            for (axis, value) in column.iter_mut().take(3).enumerate() {
                *value /= step[axis] as f32;
            }
        }
        Self {
            voxel_from_uv,
            window: [
                view.window_center_hu as f32,
                view.window_width_hu as f32,
                if geometry.inverted { 1.0 } else { 0.0 },
                geometry.mask_opacity,
            ],
            dims: [
                texture_dims[0] as f32,
                texture_dims[1] as f32,
                texture_dims[2] as f32,
                LABEL_COLOURS.len() as f32,
            ],
            visible_labels: [geometry.visible_labels, 0, 0, 0],
        }
    }

    /// The uniforms for `view` of `volume` uploaded as `textures`.
    #[must_use]
    pub fn new(
        view: &SliceView,
        axes: PlaneAxes,
        volume: &Volume,
        textures: &VolumeTextures,
        viewport_px: [f64; 2],
        mask_opacity: f32,
    ) -> Self {
        let geometry = ViewGeometry {
            axes,
            dims: volume.dims(),
            spacing_mm: volume.spacing_mm(),
            viewport_px,
            inverted: volume.info().display_inverted,
            mask_opacity,
            visible_labels: u32::MAX,
        };
        Self::for_texture(view, &geometry, textures.step, textures.texture_dims)
    }
}

/// A pipeline that draws one triangle over the viewport (`vs_main`, no vertex buffers) with
/// `fs_main` of `shader` into a target of `format`, bound by `layout`: the slice, 3D and
/// canvas shaders all draw this way.
pub(crate) fn fullscreen_pipeline(
    device: &wgpu::Device,
    label: &str,
    shader: &wgpu::ShaderModule,
    layout: &wgpu::BindGroupLayout,
    format: wgpu::TextureFormat,
) -> wgpu::RenderPipeline {
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(label),
        bind_group_layouts: &[Some(layout)],
        immediate_size: 0,
    });
    device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
        label: Some(label),
        layout: Some(&pipeline_layout),
        vertex: wgpu::VertexState {
            module: shader,
            entry_point: Some("vs_main"),
            compilation_options: wgpu::PipelineCompilationOptions::default(),
            buffers: &[],
        },
        fragment: Some(wgpu::FragmentState {
            module: shader,
            entry_point: Some("fs_main"),
            compilation_options: wgpu::PipelineCompilationOptions::default(),
            targets: &[Some(wgpu::ColorTargetState {
                format,
                blend: None,
                write_mask: wgpu::ColorWrites::ALL,
            })],
        }),
        primitive: wgpu::PrimitiveState::default(),
        depth_stencil: None,
        multisample: wgpu::MultisampleState::default(),
        multiview_mask: None,
        cache: None,
    })
}

/// Pipeline and layout for drawing slices into targets of one format; build once.
pub struct SliceRenderer {
    pipeline: wgpu::RenderPipeline,
    layout: wgpu::BindGroupLayout,
}

/// One view's GPU state: its uniform buffer and bind group.
pub struct ViewResources {
    uniforms: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
}

impl SliceRenderer {
    /// Builds the pipeline for `target_format`.
    #[must_use]
    pub fn new(device: &wgpu::Device, target_format: wgpu::TextureFormat) -> Self {
        Self::with_shader(device, target_format, "slice.wgsl", SLICE_SHADER)
    }

    /// Builds the 3D view's pipeline (maximum intensity projection, `shaders/mip.wgsl`) for
    /// `target_format`: the same bindings, with [`view::Orbit::uniforms`] as its uniforms.
    #[must_use]
    pub fn mip(device: &wgpu::Device, target_format: wgpu::TextureFormat) -> Self {
        Self::with_shader(device, target_format, "mip.wgsl", MIP_SHADER)
    }

    fn with_shader(
        device: &wgpu::Device,
        target_format: wgpu::TextureFormat,
        name: &str,
        source: &str,
    ) -> Self {
        let shader = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(name),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        let texture_entry = |binding, sample_type| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::FRAGMENT,
            ty: wgpu::BindingType::Texture {
                sample_type,
                view_dimension: wgpu::TextureViewDimension::D3,
                multisampled: false,
            },
            count: None,
        };
        let uniform_entry = |binding| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::FRAGMENT,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("keyslice slice bind group"),
            entries: &[
                uniform_entry(0),
                texture_entry(1, wgpu::TextureSampleType::Sint),
                texture_entry(2, wgpu::TextureSampleType::Uint),
                uniform_entry(3),
            ],
        });
        let pipeline =
            fullscreen_pipeline(device, "keyslice slice", &shader, &layout, target_format);
        Self { pipeline, layout }
    }

    /// Creates one view's buffer and bind group over `textures`.
    #[must_use]
    pub fn create_view(&self, device: &wgpu::Device, textures: &VolumeTextures) -> ViewResources {
        let uniforms = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("keyslice view uniforms"),
            size: std::mem::size_of::<ViewUniforms>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("keyslice view bind group"),
            layout: &self.layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: uniforms.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: wgpu::BindingResource::TextureView(&textures.volume_view),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: wgpu::BindingResource::TextureView(&textures.labels_view),
                },
                wgpu::BindGroupEntry {
                    binding: 3,
                    resource: textures.colours.as_entire_binding(),
                },
            ],
        });
        ViewResources {
            uniforms,
            bind_group,
        }
    }

    /// Writes this frame's uniforms for one view.
    pub fn prepare(queue: &wgpu::Queue, view: &ViewResources, uniforms: &ViewUniforms) {
        queue.write_buffer(&view.uniforms, 0, bytemuck::bytes_of(uniforms));
    }

    /// Draws one view into the current render pass (its viewport set by the caller).
    pub fn paint(&self, pass: &mut wgpu::RenderPass<'_>, view: &ViewResources) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &view.bind_group, &[]);
        pass.draw(0..3, 0..1);
    }
}

/// A device without a window (for tests, snapshots and headless rendering). Prefers a real
/// GPU and falls back to a software adapter (lavapipe, llvmpipe).
pub fn headless_device() -> Result<(wgpu::Device, wgpu::Queue, wgpu::AdapterInfo), RenderError> {
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..wgpu::RequestAdapterOptions::default()
    }))
    .map_err(|error| RenderError::NoAdapter(error.to_string()))?;
    let info = adapter.get_info();
    let limits = wgpu::Limits::downlevel_defaults().using_resolution(adapter.limits());
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("keyslice headless device"),
        required_features: wgpu::Features::empty(),
        required_limits: limits,
        ..wgpu::DeviceDescriptor::default()
    }))
    .map_err(|error| RenderError::Device(error.to_string()))?;
    Ok((device, queue, info))
}

/// Renders one view into an RGBA8 image of `size` pixels and reads it back (row-major).
pub fn render_to_rgba(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    renderer: &SliceRenderer,
    view: &ViewResources,
    size: [u32; 2],
) -> Result<Vec<u8>, RenderError> {
    draw_to_rgba(device, queue, size, |pass| renderer.paint(pass, view))
}

/// Runs `draw` in a render pass over an RGBA8 image of `size` pixels and reads it back
/// (row-major). `draw` may encode into the encoder first (a canvas cast before it is shown).
pub fn draw_to_rgba(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    size: [u32; 2],
    draw: impl FnOnce(&mut wgpu::RenderPass<'_>),
) -> Result<Vec<u8>, RenderError> {
    let target = device.create_texture(&wgpu::TextureDescriptor {
        label: Some("keyslice offscreen target"),
        size: wgpu::Extent3d {
            width: size[0],
            height: size[1],
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::Rgba8Unorm,
        usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
        view_formats: &[],
    });
    let target_view = target.create_view(&wgpu::TextureViewDescriptor::default());
    let row_bytes = size[0] * 4;
    let padded_row =
        row_bytes.div_ceil(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT) * wgpu::COPY_BYTES_PER_ROW_ALIGNMENT;
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("keyslice readback"),
        size: u64::from(padded_row) * u64::from(size[1]),
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
        label: Some("keyslice offscreen"),
    });
    {
        let mut pass = clear_pass(&mut encoder, &target_view, "keyslice offscreen pass");
        draw(&mut pass);
    }
    encoder.copy_texture_to_buffer(
        wgpu::TexelCopyTextureInfo {
            texture: &target,
            mip_level: 0,
            origin: wgpu::Origin3d::ZERO,
            aspect: wgpu::TextureAspect::All,
        },
        wgpu::TexelCopyBufferInfo {
            buffer: &readback,
            layout: wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(padded_row),
                rows_per_image: Some(size[1]),
            },
        },
        wgpu::Extent3d {
            width: size[0],
            height: size[1],
            depth_or_array_layers: 1,
        },
    );
    queue.submit([encoder.finish()]);
    let slice = readback.slice(..);
    let (sender, receiver) = std::sync::mpsc::channel();
    slice.map_async(wgpu::MapMode::Read, move |result| {
        // The receiver waits below; a send can only fail if it is gone, and then nobody cares.
        let _ = sender.send(result);
    });
    device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|error| RenderError::Readback(error.to_string()))?;
    receiver
        .recv()
        .map_err(|error| RenderError::Readback(error.to_string()))?
        .map_err(|error| RenderError::Readback(error.to_string()))?;
    let mapped = slice
        .get_mapped_range()
        .map_err(|error| RenderError::Readback(error.to_string()))?;
    let mut pixels = Vec::with_capacity((row_bytes * size[1]) as usize);
    for row in 0..size[1] as usize {
        let start = row * padded_row as usize;
        pixels.extend_from_slice(&mapped[start..start + row_bytes as usize]);
    }
    drop(mapped);
    readback.unmap();
    Ok(pixels)
}

/// A render pass into `target` that first clears it to black: every offscreen image starts so.
pub(crate) fn clear_pass<'encoder>(
    encoder: &'encoder mut wgpu::CommandEncoder,
    target: &wgpu::TextureView,
    label: &str,
) -> wgpu::RenderPass<'encoder> {
    encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
        label: Some(label),
        color_attachments: &[Some(wgpu::RenderPassColorAttachment {
            view: target,
            depth_slice: None,
            resolve_target: None,
            ops: wgpu::Operations {
                load: wgpu::LoadOp::Clear(wgpu::Color::BLACK),
                store: wgpu::StoreOp::Store,
            },
        })],
        depth_stencil_attachment: None,
        timestamp_writes: None,
        occlusion_query_set: None,
        multiview_mask: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volumes_within_limits_are_not_downsampled() {
        assert_eq!(downsample_steps([512, 512, 300], 2048, 1 << 29), [1, 1, 1]);
    }

    #[test]
    fn an_axis_beyond_the_limit_is_strided() {
        assert_eq!(downsample_steps([512, 512, 3000], 2048, 1 << 30), [1, 1, 2]);
    }

    #[test]
    fn the_budget_coarsens_the_longest_axis_first() {
        // 4 M voxels into 1 M: the 400-slice axis is coarsened until it is no longer the
        // longest (100 × 100 × 100).
        let step = downsample_steps([100, 100, 400], 2048, 1_000_000);
        assert_eq!(step, [1, 1, 4]);
        // Then all axes share the work.
        assert_eq!(downsample_steps([100, 100, 100], 2048, 125_000), [2, 2, 2]);
    }
}
