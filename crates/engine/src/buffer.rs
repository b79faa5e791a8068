//! Page-aligned I/O buffers, as O_DIRECT requires (aligned to at least the logical block size;
//! a page covers every device we know).

use std::alloc::{Layout, alloc_zeroed, dealloc};

pub const ALIGN: usize = 4096;

/// One allocation holding `count` buffers of `size` bytes each, every one page-aligned.
pub struct BufferPool {
    ptr: *mut u8,
    layout: Layout,
    size: usize,
    count: usize,
}

// The pool is owned by one I/O thread; the raw pointer is only handed to the kernel.
unsafe impl Send for BufferPool {}

impl BufferPool {
    pub fn new(count: usize, size: usize) -> Self {
        let size = size.div_ceil(ALIGN) * ALIGN;
        let total = (size * count).max(ALIGN);
        let layout = Layout::from_size_align(total, ALIGN).expect("valid buffer layout");
        // SAFETY: layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Self { ptr, layout, size, count }
    }

    pub fn base(&self) -> *mut u8 {
        self.ptr
    }

    pub fn total_len(&self) -> usize {
        self.layout.size()
    }

    pub fn ptr(&self, i: usize) -> *mut u8 {
        assert!(i < self.count);
        // SAFETY: i < count, so the offset stays inside the allocation.
        unsafe { self.ptr.add(i * self.size) }
    }

    /// Mutable view of buffer `i`. The caller must not have an I/O in flight on it.
    pub fn slice_mut(&mut self, i: usize) -> &mut [u8] {
        let p = self.ptr(i);
        // SAFETY: buffers do not overlap and `&mut self` rules out another view.
        unsafe { std::slice::from_raw_parts_mut(p, self.size) }
    }
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}
