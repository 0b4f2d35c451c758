//! A view drawn into a texture of its own and shown scaled to its place (`shaders/blit.wgsl`):
//! the 3D view is cast again only when what it shows changes (not on every repaint of the
//! window), and at a resolution the adapter can afford.
//!
//! Knows wgpu; nothing of egui or of what is drawn.

/// The blit shader's source.
pub const BLIT_SHADER: &str = concat!(
    include_str!("../../../../shaders/fullscreen.wgsl"),
    include_str!("../../../../shaders/blit.wgsl")
);

/// An offscreen image, the pipeline that shows it, and what it was last drawn from.
pub struct Canvas {
    format: wgpu::TextureFormat,
    pipeline: wgpu::RenderPipeline,
    layout: wgpu::BindGroupLayout,
    sampler: wgpu::Sampler,
    image: Option<Image>,
    drawn: Option<Vec<u8>>,
}

struct Image {
    view: wgpu::TextureView,
    size: [u32; 2],
    bind_group: wgpu::BindGroup,
}

impl Canvas {
    /// A canvas whose image has `format` (the pipelines drawing into it target the same).
    #[must_use]
    pub fn new(device: &wgpu::Device, format: wgpu::TextureFormat) -> Self {
        let shader = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("blit.wgsl"),
            source: wgpu::ShaderSource::Wgsl(BLIT_SHADER.into()),
        });
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("keyslice canvas bind group"),
            entries: &[
                wgpu::BindGroupLayoutEntry {
                    binding: 0,
                    visibility: wgpu::ShaderStages::FRAGMENT,
                    ty: wgpu::BindingType::Texture {
                        sample_type: wgpu::TextureSampleType::Float { filterable: true },
                        view_dimension: wgpu::TextureViewDimension::D2,
                        multisampled: false,
                    },
                    count: None,
                },
                wgpu::BindGroupLayoutEntry {
                    binding: 1,
                    visibility: wgpu::ShaderStages::FRAGMENT,
                    ty: wgpu::BindingType::Sampler(wgpu::SamplerBindingType::Filtering),
                    count: None,
                },
            ],
        });
        let pipeline =
            super::fullscreen_pipeline(device, "keyslice canvas", &shader, &layout, format);
        let sampler = device.create_sampler(&wgpu::SamplerDescriptor {
            label: Some("keyslice canvas sampler"),
            mag_filter: wgpu::FilterMode::Linear,
            min_filter: wgpu::FilterMode::Linear,
            ..wgpu::SamplerDescriptor::default()
        });
        Self {
            format,
            pipeline,
            layout,
            sampler,
            image: None,
            drawn: None,
        }
    }

    /// Draws the image again with `draw` at `size` pixels, unless it was last drawn at that
    /// size from the same `key` (the bytes of everything the drawing depends on). Returns
    /// whether it drew.
    pub fn update(
        &mut self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        size: [u32; 2],
        key: &[u8],
        draw: impl FnOnce(&mut wgpu::RenderPass<'_>),
    ) -> bool {
        let size = size.map(|side| side.max(1));
        if self.image.as_ref().map(|image| image.size) != Some(size) {
            self.image = Some(self.create_image(device, size));
            self.drawn = None;
        }
        if self.drawn.as_deref() == Some(key) {
            return false;
        }
        let Some(image) = &self.image else {
            return false;
        };
        let mut pass = super::clear_pass(encoder, &image.view, "keyslice canvas pass");
        draw(&mut pass);
        drop(pass);
        self.drawn = Some(key.to_vec());
        true
    }

    /// Shows the image, scaled to the pass's viewport (nothing before the first draw).
    pub fn paint(&self, pass: &mut wgpu::RenderPass<'_>) {
        if let Some(image) = &self.image {
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &image.bind_group, &[]);
            pass.draw(0..3, 0..1);
        }
    }

    /// The size the image was last made at.
    #[must_use]
    pub fn size(&self) -> Option<[u32; 2]> {
        self.image.as_ref().map(|image| image.size)
    }

    fn create_image(&self, device: &wgpu::Device, size: [u32; 2]) -> Image {
        let texture = device.create_texture(&wgpu::TextureDescriptor {
            label: Some("keyslice canvas image"),
            size: wgpu::Extent3d {
                width: size[0],
                height: size[1],
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: self.format,
            usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::TEXTURE_BINDING,
            view_formats: &[],
        });
        let view = texture.create_view(&wgpu::TextureViewDescriptor::default());
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("keyslice canvas image bind group"),
            layout: &self.layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::TextureView(&view),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: wgpu::BindingResource::Sampler(&self.sampler),
                },
            ],
        });
        Image {
            view,
            size,
            bind_group,
        }
    }
}
