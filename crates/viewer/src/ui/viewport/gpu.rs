//! GPU glue: the study's textures and pipeline kept in egui's callback resources
//! ([`ViewerGpu`], built once per study), and the per-frame paint callbacks of one plane and
//! of the 3D view (cast into its canvas only when what it shows changes).

use super::state::plane_index;
use crate::render::canvas::Canvas;
use crate::render::orbit::{SOFTWARE_PREVIEW_SAMPLES, SOFTWARE_STILL_SAMPLES, render_size};
use crate::render::pooled::{
    POOLED_SIDE, upload_pooled, upload_pooled_labels, write_pooled_labels_box,
};
use crate::render::view::{Plane, SliceView};
use crate::render::{
    SliceRenderer, ViewGeometry, ViewResources, ViewUniforms, VolumeTextures, upload_volume,
};
use keyslice_core::volume::{LabelVolume, Volume};

/// GPU state of the open study, stored in `egui_wgpu`'s callback resources.
pub struct ViewerGpu {
    pub(super) renderer: SliceRenderer,
    /// The 3D view's pipeline and its view.
    pub(super) mip: SliceRenderer,
    pub(super) mip_view: ViewResources,
    /// The coarse copy the 3D view turns with on a software adapter, and its view.
    pooled: Option<(VolumeTextures, ViewResources)>,
    /// Where the 3D view is cast, and shown from.
    canvas: Canvas,
    /// A software adapter (lavapipe, llvmpipe): the 3D view is drawn within a budget.
    software: bool,
    /// Counts changes of the labels, so the 3D view is cast again after one.
    labels_changed: u64,
    /// The uploaded textures (and their notices).
    pub textures: VolumeTextures,
    pub(super) views: [ViewResources; 3],
}

impl ViewerGpu {
    /// Uploads `volume` and builds the pipeline for `render_state`'s target, replacing any
    /// previous study. Returns the notices the user should see (downsampling and the like).
    #[must_use = "the notices tell the user the volume was downsampled or rounded"]
    pub fn install(
        render_state: &egui_wgpu::RenderState,
        volume: &Volume,
        labels: Option<&LabelVolume>,
    ) -> Vec<String> {
        let renderer = SliceRenderer::new(&render_state.device, render_state.target_format);
        let textures = upload_volume(&render_state.device, &render_state.queue, volume, labels);
        let views = [0, 1, 2].map(|_| renderer.create_view(&render_state.device, &textures));
        let mip = SliceRenderer::mip(&render_state.device, render_state.target_format);
        let mip_view = mip.create_view(&render_state.device, &textures);
        let software = render_state.adapter.get_info().device_type == wgpu::DeviceType::Cpu;
        let pooled = if software {
            upload_pooled(
                &render_state.device,
                &render_state.queue,
                volume,
                &textures,
                labels,
                POOLED_SIDE,
            )
            .map(|pooled| {
                let view = mip.create_view(&render_state.device, &pooled);
                (pooled, view)
            })
        } else {
            None
        };
        let canvas = Canvas::new(&render_state.device, render_state.target_format);
        let notices = textures.notices.clone();
        render_state
            .renderer
            .write()
            .callback_resources
            .insert(Self {
                renderer,
                mip,
                mip_view,
                pooled,
                canvas,
                software,
                labels_changed: 0,
                textures,
                views,
            });
        notices
    }

    /// Replaces the mask overlay of the installed study (masks that finish loading after the
    /// volume is on screen). Does nothing when no study is installed.
    pub fn set_labels(
        render_state: &egui_wgpu::RenderState,
        dims: [usize; 3],
        labels: Option<&LabelVolume>,
    ) {
        let mut renderer = render_state.renderer.write();
        let Some(gpu) = renderer.callback_resources.get_mut::<Self>() else {
            return;
        };
        crate::render::upload_labels(
            &render_state.device,
            &render_state.queue,
            &mut gpu.textures,
            dims,
            labels,
        );
        gpu.views = [0, 1, 2].map(|_| {
            gpu.renderer
                .create_view(&render_state.device, &gpu.textures)
        });
        gpu.mip_view = gpu.mip.create_view(&render_state.device, &gpu.textures);
        if let Some((pooled, view)) = &mut gpu.pooled {
            upload_pooled_labels(&render_state.device, &render_state.queue, pooled, labels);
            *view = gpu.mip.create_view(&render_state.device, pooled);
        }
        gpu.labels_changed += 1;
    }

    /// Shows a change of `labels` inside the box `min..=max` (a brush stroke): that box is
    /// written into the label texture in place when it can be, else the labels are uploaded
    /// whole.
    pub fn update_labels(
        render_state: &egui_wgpu::RenderState,
        labels: &LabelVolume,
        min: [usize; 3],
        max: [usize; 3],
    ) {
        let written = {
            let mut renderer = render_state.renderer.write();
            let Some(gpu) = renderer.callback_resources.get_mut::<Self>() else {
                return;
            };
            gpu.labels_changed += 1;
            crate::render::write_labels_box(&render_state.queue, &gpu.textures, labels, min, max)
                && gpu.pooled.as_ref().is_none_or(|(pooled, _)| {
                    write_pooled_labels_box(&render_state.queue, pooled, labels, min, max)
                })
        };
        if !written {
            Self::set_labels(render_state, labels.dims, Some(labels));
        }
    }
}

/// One frame's draw of one plane: its view and geometry, turned into uniforms against the
/// uploaded texture (which may be downsampled) in `prepare`.
pub(super) struct SlicePaint {
    pub(super) plane: Plane,
    pub(super) view: SliceView,
    pub(super) geometry: ViewGeometry,
}

impl egui_wgpu::CallbackTrait for SlicePaint {
    fn prepare(
        &self,
        _device: &wgpu::Device,
        queue: &wgpu::Queue,
        _screen: &egui_wgpu::ScreenDescriptor,
        _encoder: &mut wgpu::CommandEncoder,
        resources: &mut egui_wgpu::CallbackResources,
    ) -> Vec<wgpu::CommandBuffer> {
        if let Some(gpu) = resources.get::<ViewerGpu>() {
            let uniforms = ViewUniforms::for_texture(
                &self.view,
                &self.geometry,
                gpu.textures.step,
                gpu.textures.texture_dims,
            );
            SliceRenderer::prepare(queue, &gpu.views[plane_index(self.plane)], &uniforms);
        }
        Vec::new()
    }

    fn paint(
        &self,
        _info: egui::PaintCallbackInfo,
        pass: &mut wgpu::RenderPass<'static>,
        resources: &egui_wgpu::CallbackResources,
    ) {
        if let Some(gpu) = resources.get::<ViewerGpu>() {
            gpu.renderer
                .paint(pass, &gpu.views[plane_index(self.plane)]);
        }
    }
}

/// One frame's draw of the 3D view: its camera and what the projection needs, made into
/// uniforms against the uploaded texture (which may be downsampled) in `prepare`, and cast
/// into the canvas there when they changed; `paint` shows the canvas.
pub(super) struct OrbitPaint {
    pub(super) orbit: crate::render::orbit::Orbit,
    pub(super) projection: crate::render::orbit::Projection,
}

impl egui_wgpu::CallbackTrait for OrbitPaint {
    fn prepare(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        screen: &egui_wgpu::ScreenDescriptor,
        encoder: &mut wgpu::CommandEncoder,
        resources: &mut egui_wgpu::CallbackResources,
    ) -> Vec<wgpu::CommandBuffer> {
        let Some(gpu) = resources.get_mut::<ViewerGpu>() else {
            return Vec::new();
        };
        // While turning on a software adapter: the coarse copy, fewer pixels.
        let (textures, view, pooled) = match &gpu.pooled {
            Some((pooled, view)) if self.orbit.preview => (pooled, view, true),
            _ => (&gpu.textures, &gpu.mip_view, false),
        };
        let projection = crate::render::orbit::Projection {
            step: textures.step,
            texture_dims: textures.texture_dims,
            pooled,
            ..self.projection
        };
        let uniforms = self.orbit.uniforms(&projection);
        let budget = gpu.software.then_some(if self.orbit.preview {
            SOFTWARE_PREVIEW_SAMPLES
        } else {
            SOFTWARE_STILL_SAMPLES
        });
        let pixels_per_point = f64::from(screen.pixels_per_point);
        let size = render_size(
            projection.viewport_px.map(|side| side * pixels_per_point),
            uniforms.visible_labels[1],
            budget,
        );
        let mut key = bytemuck::bytes_of(&uniforms).to_vec();
        key.extend(gpu.labels_changed.to_le_bytes());
        key.push(u8::from(pooled));
        let mip = &gpu.mip;
        gpu.canvas.update(device, encoder, size, &key, |pass| {
            SliceRenderer::prepare(queue, view, &uniforms);
            mip.paint(pass, view);
        });
        Vec::new()
    }

    fn paint(
        &self,
        _info: egui::PaintCallbackInfo,
        pass: &mut wgpu::RenderPass<'static>,
        resources: &egui_wgpu::CallbackResources,
    ) {
        if let Some(gpu) = resources.get::<ViewerGpu>() {
            gpu.canvas.paint(pass);
        }
    }
}
