//! Work off the UI thread: loading a study, the open dialog, an analysis and an export each
//! run as a [`Job`], whose messages the window picks up once per frame without waiting.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError, channel};
use std::time::{Duration, Instant};

/// A worker thread and the channel its messages come back on. Dropping the job tells the
/// worker it is no longer wanted (see [`Job::spawn_cancellable`]).
pub struct Job<T> {
    receiver: Receiver<T>,
    started: Instant,
    cancelled: Arc<AtomicBool>,
}

impl<T> Drop for Job<T> {
    fn drop(&mut self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }
}

/// What a job has for the UI thread this frame.
#[derive(Debug)]
pub enum Polled<T> {
    /// Nothing yet; the job is still running.
    Pending,
    /// A message (a job may send several).
    Message(T),
    /// The worker is gone and sent nothing more.
    Ended,
}

impl<T: Send + 'static> Job<T> {
    /// Runs `work` on a worker thread. Each message it sends wakes the window, so the frame
    /// that shows it comes at once; a message sent after the window has dropped the job is
    /// discarded.
    pub fn spawn(ctx: &egui::Context, work: impl FnOnce(&dyn Fn(T)) + Send + 'static) -> Self {
        Self::spawn_cancellable(ctx, move |send, _| work(send))
    }

    /// [`Job::spawn`], where `work` is also given `cancelled()`: true once the window has
    /// dropped the job (a newer one replaced it), so the worker stops at its next check and
    /// frees what it holds instead of finishing work nobody will see.
    pub fn spawn_cancellable(
        ctx: &egui::Context,
        work: impl FnOnce(&dyn Fn(T), &dyn Fn() -> bool) + Send + 'static,
    ) -> Self {
        let (sender, receiver) = channel();
        let context = ctx.clone();
        let job = Self::from_receiver(receiver);
        let cancelled = Arc::clone(&job.cancelled);
        std::thread::spawn(move || {
            let send = move |message| {
                let _ = sender.send(message);
                context.request_repaint();
            };
            work(&send, &|| cancelled.load(Ordering::Relaxed));
        });
        job
    }
}

impl<T> Job<T> {
    /// A job whose worker was started elsewhere and sends on the other end of `receiver`.
    #[must_use]
    pub fn from_receiver(receiver: Receiver<T>) -> Self {
        Self {
            receiver,
            started: Instant::now(),
            cancelled: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The next message, if one has arrived; never blocks.
    #[must_use]
    pub fn poll(&self) -> Polled<T> {
        match self.receiver.try_recv() {
            Ok(message) => Polled::Message(message),
            Err(TryRecvError::Empty) => Polled::Pending,
            Err(TryRecvError::Disconnected) => Polled::Ended,
        }
    }

    /// Time since the job started.
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Messages arrive in order, then the end; a job's clock runs from its start.
    #[test]
    fn messages_then_the_end() {
        let ctx = egui::Context::default();
        let job = Job::spawn(&ctx, |send| {
            send(1);
            send(2);
        });
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match job.poll() {
                Polled::Message(value) => seen.push(value),
                Polled::Ended => break,
                Polled::Pending => {
                    assert!(Instant::now() < deadline, "the job never ended");
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
        assert_eq!(seen, [1, 2]);
        assert!(job.elapsed() < Duration::from_secs(10));
    }

    /// A dropped job tells its worker so.
    #[test]
    fn dropping_a_job_cancels_its_worker() {
        let ctx = egui::Context::default();
        let (told, heard) = channel();
        let job = Job::<()>::spawn_cancellable(&ctx, move |_, cancelled| {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !cancelled() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            let _ = told.send(cancelled());
        });
        drop(job);
        assert_eq!(heard.recv_timeout(Duration::from_secs(10)), Ok(true));
    }

    /// A job with nothing to say yet is pending, not ended.
    #[test]
    fn pending_until_a_message() {
        let (sender, receiver) = channel::<u8>();
        let job = Job::from_receiver(receiver);
        assert!(matches!(job.poll(), Polled::Pending));
        sender.send(7).unwrap();
        assert!(matches!(job.poll(), Polled::Message(7)));
        drop(sender);
        assert!(matches!(job.poll(), Polled::Ended));
    }
}
