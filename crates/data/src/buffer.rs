//! Page-aligned I/O buffers, as O_DIRECT requires (aligned to at least the logical block size;
//! a page covers every device we know).

use std::alloc::{Layout, alloc_zeroed, dealloc};

pub const ALIGN: usize = 4096;

/// One allocation holding `count` buffers of `size` bytes each, every one page-aligned — or,
/// [`BufferPool::shared`], one buffer that all `count` slots use.
pub struct BufferPool {
    ptr: *mut u8,
    layout: Layout,
    size: usize,
    count: usize,
    /// Bytes from one slot's buffer to the next: `size`, or 0 when every slot shares one.
    stride: usize,
}

// SAFETY: the pool is owned by one I/O thread; the raw pointer is only handed to the kernel.
unsafe impl Send for BufferPool {}

impl BufferPool {
    pub fn new(count: usize, size: usize) -> Self {
        Self::alloc(count, size, false)
    }

    /// One buffer for all `count` slots: for the null back-end, which neither reads into nor
    /// writes from a buffer (verify, which checks what a read brought, is refused with it), so
    /// the tool-overhead measurement costs no memory per I/O (2,048 workers × 1 MiB once took
    /// 2 GB). The data is still generated into it for every write.
    pub fn shared(count: usize, size: usize) -> Self {
        Self::alloc(count, size, true)
    }

    fn alloc(count: usize, size: usize, shared: bool) -> Self {
        let size = size.div_ceil(ALIGN) * ALIGN;
        let buffers = if shared { count.min(1) } else { count };
        let total = (size * buffers).max(ALIGN);
        let layout = Layout::from_size_align(total, ALIGN).expect("valid buffer layout");
        // SAFETY: layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Self { ptr, layout, size, count, stride: if shared { 0 } else { size } }
    }

    /// How many distinct buffers the slots use (1 for a shared pool).
    pub fn distinct(&self) -> usize {
        if self.stride == 0 { self.count.min(1) } else { self.count }
    }

    pub fn base(&self) -> *mut u8 {
        self.ptr
    }

    pub fn total_len(&self) -> usize {
        self.layout.size()
    }

    pub fn ptr(&self, i: usize) -> *mut u8 {
        assert!(i < self.count);
        // SAFETY: i < count, so the offset (i × stride, stride 0 or size) stays inside the
        // allocation.
        unsafe { self.ptr.add(i * self.stride) }
    }

    /// Mutable view of buffer `i`. The caller must not have an I/O in flight on it (on a
    /// shared pool: on any slot, which the null back-end never has).
    pub fn slice_mut(&mut self, i: usize) -> &mut [u8] {
        let p = self.ptr(i);
        // SAFETY: the view lies inside the allocation, and `&mut self` rules out another view
        // at the same time, whether or not slots share their buffer.
        unsafe { std::slice::from_raw_parts_mut(p, self.size) }
    }
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_pool_is_one_buffer_for_every_slot() {
        let mut p = BufferPool::shared(2048, 1 << 20);
        assert_eq!((p.total_len(), p.distinct()), (1 << 20, 1));
        assert_eq!(p.ptr(0), p.ptr(2047));
        p.slice_mut(2047)[0] = 7;
        assert_eq!(p.slice_mut(0)[0], 7);
        let p = BufferPool::new(4, 5000);
        assert_eq!((p.total_len(), p.distinct()), (4 * 8192, 4));
        assert_eq!(p.ptr(1) as usize - p.ptr(0) as usize, 8192);
    }
}
