/*
 * kad kernel prelude (OpenCL C 1.2).
 *
 * kad prepends this file to every OpenCL C module, after the specialisation
 * block that defines KAD_RANK, KAD_LINEAR, KAD_INDEX_BITS, the static sizes
 * and KAD_CHECK_BOUNDS for one launch shape. The queries below follow
 * KernelAbstractions' @index / @ndrange / @groupsize, with 0-based indices
 * and dimension 0 varying fastest (column-major):
 *
 *   kad_global_index(d)   index of this lane in dimension d, offsets included
 *   kad_global_linear()   column-major position of this lane in the ndrange
 *   kad_local_index(d)    index within the workgroup;   kad_local_linear()
 *   kad_group_index(d)    index of the workgroup;       kad_group_linear()
 *   kad_ndrange(d)        extent in dimension d;        kad_ndrange_offset(d)
 *   kad_ndrange_rank()    number of dimensions;         kad_ndrange_length()
 *   kad_groupsize(d)      workgroup size in dimension d
 *   kad_ngroups(d)        number of workgroups in dimension d
 *   kad_active()          whether this lane lies inside the ndrange
 *
 * A kernel takes KAD_CONTEXT as its first parameter; kad passes it. Lanes of
 * a padded workgroup may lie outside the ndrange: guard memory accesses with
 * kad_active(), and let every lane reach every barrier.
 */
#ifndef KAD_RANK
#error "kad: compile this kernel through kad, which defines its launch specialisation"
#endif

#if KAD_INDEX_BITS == 64
typedef ulong kad_uint;
#else
typedef uint kad_uint;
#endif

/* The dynamic part of a launch, passed by value. Its layout is
 * kad::LaunchContext (core/launch_context.h). */
typedef struct {
  long extent[8];
  long offset[8];
  long groupsize[8];
  long ngroups[8];
} kad_context;

#define KAD_CONTEXT const kad_context __kad_ctx

/* Static sizes are program-scope constants: loads at constant indices fold,
 * so a fully static launch computes its indices at compile time. */
#if KAD_STATIC_NDRANGE
__constant long __kad_static_extent[8] = {KAD_STATIC_EXTENTS};
__constant long __kad_static_offset[8] = {KAD_STATIC_OFFSETS};
#define __kad_extent(c, d) ((kad_uint)__kad_static_extent[d])
#define __kad_offset(c, d) (__kad_static_offset[d])
#else
#define __kad_extent(c, d) ((kad_uint)(c)->extent[d])
#define __kad_offset(c, d) ((c)->offset[d])
#endif

#if KAD_STATIC_WORKGROUP
__constant long __kad_static_groupsize[8] = {KAD_STATIC_GROUPSIZE};
#define __kad_groupsize(c, d) ((kad_uint)__kad_static_groupsize[d])
#else
#define __kad_groupsize(c, d) ((kad_uint)(c)->groupsize[d])
#endif

#if KAD_STATIC_BLOCKS
__constant long __kad_static_ngroups[8] = {KAD_STATIC_NGROUPS};
#define __kad_ngroups(c, d) ((kad_uint)__kad_static_ngroups[d])
#else
#define __kad_ngroups(c, d) ((kad_uint)(c)->ngroups[d])
#endif

/* Every helper is inlined into the kernel: PoCL resolves the hardware ids
 * (get_group_id reads a work-group context) only in the kernel's own body,
 * and a helper left out of line fails to load ("undefined symbol
 * _group_id_x"). For the same reason hardware ids are read with constant
 * dimensions only, all three unconditionally: clang merges
 * `d == 0 ? get_group_id(0) : get_group_id(1)` into one call with a computed
 * dimension, which PoCL 3.1 cannot lower. */
#define KAD_INLINE static inline __attribute__((always_inline))
/* Loops over dimensions have at most KAD_RANK trips: unrolled, a static
 * launch leaves no loop and no branch in the kernel. */
#define __KAD_UNROLL _Pragma("unroll")

KAD_INLINE kad_uint __kad_hw_group(uint d) {
  const kad_uint x = get_group_id(0), y = get_group_id(1), z = get_group_id(2);
  return d == 0 ? x : d == 1 ? y : z;
}

KAD_INLINE kad_uint __kad_hw_local(uint d) {
  const kad_uint x = get_local_id(0), y = get_local_id(1), z = get_local_id(2);
  return d == 0 ? x : d == 1 ? y : z;
}

KAD_INLINE kad_uint __kad_group_d(const kad_context* c, uint d) {
#if KAD_LINEAR
  /* One hardware dimension: recover the Cartesian group by unsigned division. */
  kad_uint g = (kad_uint)get_group_id(0);
  __KAD_UNROLL
  for (uint k = 0; k < d; ++k) g /= __kad_ngroups(c, k);
  return g % __kad_ngroups(c, d);
#else
  (void)c;
  return __kad_hw_group(d);
#endif
}

KAD_INLINE kad_uint __kad_local_d(const kad_context* c, uint d) {
#if KAD_LINEAR
  kad_uint l = (kad_uint)get_local_id(0);
  __KAD_UNROLL
  for (uint k = 0; k < d; ++k) l /= __kad_groupsize(c, k);
  return l % __kad_groupsize(c, d);
#else
  (void)c;
  return __kad_hw_local(d);
#endif
}

/* Position of this lane in the (unpadded) ndrange, dimension d, no offset. */
KAD_INLINE kad_uint __kad_pos(const kad_context* c, uint d) {
  return __kad_group_d(c, d) * __kad_groupsize(c, d) + __kad_local_d(c, d);
}

KAD_INLINE long __kad_global_index(const kad_context* c, uint d) {
  if (d >= KAD_RANK) return 0;
  return __kad_offset(c, d) + (long)__kad_pos(c, d);
}

KAD_INLINE long __kad_global_linear(const kad_context* c) {
  kad_uint linear = 0, stride = 1;
  __KAD_UNROLL
  for (uint d = 0; d < KAD_RANK; ++d) {
    linear += __kad_pos(c, d) * stride;
    stride *= __kad_extent(c, d);
  }
  return (long)linear;
}

KAD_INLINE long __kad_local_index(const kad_context* c, uint d) {
  return d < KAD_RANK ? (long)__kad_local_d(c, d) : 0;
}

KAD_INLINE long __kad_local_linear(const kad_context* c) {
#if KAD_LINEAR
  (void)c;
  return (long)get_local_id(0);
#else
  kad_uint linear = 0, stride = 1;
  __KAD_UNROLL
  for (uint d = 0; d < KAD_RANK; ++d) {
    linear += __kad_local_d(c, d) * stride;
    stride *= __kad_groupsize(c, d);
  }
  return (long)linear;
#endif
}

KAD_INLINE long __kad_group_index(const kad_context* c, uint d) {
  return d < KAD_RANK ? (long)__kad_group_d(c, d) : 0;
}

KAD_INLINE long __kad_group_linear(const kad_context* c) {
#if KAD_LINEAR
  (void)c;
  return (long)get_group_id(0);
#else
  kad_uint linear = 0, stride = 1;
  __KAD_UNROLL
  for (uint d = 0; d < KAD_RANK; ++d) {
    linear += __kad_group_d(c, d) * stride;
    stride *= __kad_ngroups(c, d);
  }
  return (long)linear;
#endif
}

KAD_INLINE long __kad_ndrange_length(const kad_context* c) {
  long n = 1;
  __KAD_UNROLL
  for (uint d = 0; d < KAD_RANK; ++d) n *= (long)__kad_extent(c, d);
  return n;
}

KAD_INLINE int __kad_active(const kad_context* c) {
#if KAD_CHECK_BOUNDS
  __KAD_UNROLL
  for (uint d = 0; d < KAD_RANK; ++d)
    if (__kad_pos(c, d) >= __kad_extent(c, d)) return 0;
#endif
  (void)c;
  return 1;
}

#define kad_global_index(d) __kad_global_index(&__kad_ctx, (d))
#define kad_global_linear() __kad_global_linear(&__kad_ctx)
#define kad_local_index(d) __kad_local_index(&__kad_ctx, (d))
#define kad_local_linear() __kad_local_linear(&__kad_ctx)
#define kad_group_index(d) __kad_group_index(&__kad_ctx, (d))
#define kad_group_linear() __kad_group_linear(&__kad_ctx)
#define kad_ndrange(d) ((d) < KAD_RANK ? (long)__kad_extent(&__kad_ctx, (d)) : 1L)
#define kad_ndrange_offset(d) ((d) < KAD_RANK ? (long)__kad_offset(&__kad_ctx, (d)) : 0L)
#define kad_ndrange_rank() KAD_RANK
#define kad_ndrange_length() __kad_ndrange_length(&__kad_ctx)
#define kad_groupsize(d) ((d) < KAD_RANK ? (long)__kad_groupsize(&__kad_ctx, (d)) : 1L)
#define kad_ngroups(d) ((d) < KAD_RANK ? (long)__kad_ngroups(&__kad_ctx, (d)) : 1L)
#define kad_active() __kad_active(&__kad_ctx)
