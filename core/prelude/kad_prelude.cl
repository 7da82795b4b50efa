/*
 * kad kernel prelude (OpenCL C 1.2).
 *
 * The queries below follow KernelAbstractions' @index / @ndrange /
 * @groupsize, with 0-based indices and dimension 0 varying fastest
 * (column-major):
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
 *
 * The prelude has three forms, one file:
 *
 * Source form (modules submitted as OpenCL C). kad prepends this file, after
 * the specialisation block that defines KAD_RANK, KAD_LINEAR, KAD_INDEX_BITS,
 * the static sizes and KAD_CHECK_BOUNDS for one launch shape, and compiles
 * the result once per specialisation.
 *
 * Linked form (modules submitted as SPIR-V or spir64 LLVM bitcode). This
 * file is installed with the client library as include/kad/kad_prelude.cl;
 * build the module against it with KAD_LINKED_SPECIALIZATION defined:
 *
 *   clang-15 -x cl -cl-std=CL1.2 -target spir64 -Xclang -finclude-default-header \
 *       -Xclang -disable-llvm-passes -DKAD_LINKED_SPECIALIZATION \
 *       -I <prefix>/include -include kad/kad_prelude.cl -emit-llvm -c kernel.cl -o kernel.bc
 *   llvm-spirv-15 kernel.bc -o kernel.spv      # for a SPIR-V module
 *
 * In this form the prelude reads no KAD_* macro: every specialisation value
 * comes from a __kad_spec_* function that the module only declares (see
 * below; __kad_linked_prelude_v1 marks such a module). For each
 * specialisation kad compiles their definitions (this file with
 * KAD_SPECIALIZATION_MODULE) and links them with the module
 * (Toolchain::lower_ir); once inlined they fold, so static sizes and the
 * launch choice (N-d or linear) fold as in the source form. Indices are
 * always computed in 64 bits. -disable-llvm-passes keeps LLVM's optimiser,
 * whose `freeze` llvm-spirv 15 cannot translate, out of the module (bitcode
 * may be optimised); kad or the device's compiler optimises after linking.
 * KAD_RANK and the other macros of the source form do not exist in a linked
 * module. Every helper stays always_inline and reads hardware ids with
 * constant dimensions in this form too (see PoCL below).
 *
 * Specialisation module (kad's own). With KAD_SPECIALIZATION_MODULE defined
 * after the specialisation block, the file defines the __kad_spec_*
 * functions and nothing else.
 */

#if defined(KAD_SPECIALIZATION_MODULE)
/* ------------------------------------------------------------------------ */
/* The definitions a linked module is completed with, for one specialisation. */

#ifndef KAD_RANK
#error "kad: the specialisation module needs the specialisation block"
#endif

#define __KAD_SPEC_DEFINE __attribute__((always_inline, const))
/* Element d of an 8-element list, as a chain of selects: no table in memory. */
#define __KAD_PICK(d, ...) __KAD_PICK8(d, __VA_ARGS__)
#define __KAD_PICK8(d, a0, a1, a2, a3, a4, a5, a6, a7)                                  \
  ((d) == 0 ? (a0) : (d) == 1 ? (a1) : (d) == 2 ? (a2) : (d) == 3 ? (a3) : (d) == 4 ? (a4) \
   : (d) == 5 ? (a5) : (d) == 6 ? (a6) : (a7))

__KAD_SPEC_DEFINE int __kad_spec_rank(void) { return KAD_RANK; }
__KAD_SPEC_DEFINE int __kad_spec_linear(void) { return KAD_LINEAR; }
__KAD_SPEC_DEFINE int __kad_spec_check_bounds(void) { return KAD_CHECK_BOUNDS; }
__KAD_SPEC_DEFINE int __kad_spec_static_ndrange(void) { return KAD_STATIC_NDRANGE; }
__KAD_SPEC_DEFINE int __kad_spec_static_workgroup(void) { return KAD_STATIC_WORKGROUP; }
__KAD_SPEC_DEFINE int __kad_spec_static_blocks(void) { return KAD_STATIC_BLOCKS; }
#if KAD_STATIC_NDRANGE
__KAD_SPEC_DEFINE long __kad_spec_static_extent(uint d) { return __KAD_PICK(d, KAD_STATIC_EXTENTS); }
__KAD_SPEC_DEFINE long __kad_spec_static_offset(uint d) { return __KAD_PICK(d, KAD_STATIC_OFFSETS); }
#else
__KAD_SPEC_DEFINE long __kad_spec_static_extent(uint d) { return 1; }
__KAD_SPEC_DEFINE long __kad_spec_static_offset(uint d) { return 0; }
#endif
#if KAD_STATIC_WORKGROUP
__KAD_SPEC_DEFINE long __kad_spec_static_groupsize(uint d) { return __KAD_PICK(d, KAD_STATIC_GROUPSIZE); }
#else
__KAD_SPEC_DEFINE long __kad_spec_static_groupsize(uint d) { return 1; }
#endif
#if KAD_STATIC_BLOCKS
__KAD_SPEC_DEFINE long __kad_spec_static_ngroups(uint d) { return __KAD_PICK(d, KAD_STATIC_NGROUPS); }
#else
__KAD_SPEC_DEFINE long __kad_spec_static_ngroups(uint d) { return 1; }
#endif

#else /* !KAD_SPECIALIZATION_MODULE */
/* ------------------------------------------------------------------------ */

/* The dynamic part of a launch, passed by value. Its layout is
 * kad::LaunchContext (core/launch_context.h). */
typedef struct {
  long extent[8];
  long offset[8];
  long groupsize[8];
  long ngroups[8];
} kad_context;

#define KAD_CONTEXT const kad_context __kad_ctx

#if defined(KAD_LINKED_SPECIALIZATION)
/* Linked form: the specialisation, as functions kad defines at lowering. The
 * `const` attribute lets the compiler merge and hoist calls before they are
 * linked and inlined. Static sizes are only read where they are static. */
#define __KAD_SPEC_DECLARE __attribute__((const))
__KAD_SPEC_DECLARE int __kad_spec_rank(void);
__KAD_SPEC_DECLARE int __kad_spec_linear(void);        /* 1: linear 1-d launch */
__KAD_SPEC_DECLARE int __kad_spec_check_bounds(void);  /* 0: every lane is active */
__KAD_SPEC_DECLARE int __kad_spec_static_ndrange(void);
__KAD_SPEC_DECLARE long __kad_spec_static_extent(uint d);
__KAD_SPEC_DECLARE long __kad_spec_static_offset(uint d);
__KAD_SPEC_DECLARE int __kad_spec_static_workgroup(void);
__KAD_SPEC_DECLARE long __kad_spec_static_groupsize(uint d);
__KAD_SPEC_DECLARE int __kad_spec_static_blocks(void);
__KAD_SPEC_DECLARE long __kad_spec_static_ngroups(uint d);

/* Marks a module built against this form (and this version of it): kad
 * refuses IR modules without it. */
__constant int __kad_linked_prelude_v1 __attribute__((weak)) = 1;

typedef ulong kad_uint;
#define __KAD_RANK __kad_spec_rank()
#define __KAD_LINEAR __kad_spec_linear()
#define __KAD_CHECK_BOUNDS __kad_spec_check_bounds()
#define __kad_extent(c, d) \
  (__kad_spec_static_ndrange() ? (kad_uint)__kad_spec_static_extent(d) : (kad_uint)(c)->extent[d])
#define __kad_offset(c, d) \
  (__kad_spec_static_ndrange() ? __kad_spec_static_offset(d) : (c)->offset[d])
#define __kad_groupsize(c, d)                                                          \
  (__kad_spec_static_workgroup() ? (kad_uint)__kad_spec_static_groupsize(d) \
                                 : (kad_uint)(c)->groupsize[d])
#define __kad_ngroups(c, d) \
  (__kad_spec_static_blocks() ? (kad_uint)__kad_spec_static_ngroups(d) : (kad_uint)(c)->ngroups[d])

#else /* source form */

#ifndef KAD_RANK
#error "kad: compile this kernel through kad, which defines its launch specialisation (or build an IR module with -DKAD_LINKED_SPECIALIZATION)"
#endif

#if KAD_INDEX_BITS == 64
typedef ulong kad_uint;
#else
typedef uint kad_uint;
#endif

#define __KAD_RANK KAD_RANK
#define __KAD_LINEAR KAD_LINEAR
#define __KAD_CHECK_BOUNDS KAD_CHECK_BOUNDS

/* A backend whose compiler bounds a kernel's workgroup by what it declares
 * (AMDGPU: 256 work-items unless told otherwise) defines
 * KAD_REQD_WORK_GROUP_SIZE for a static workgroup size: every kernel of the
 * program then declares it (a program is compiled for one entry and one
 * launch shape, so only that entry is ever launched from it). */
#ifdef KAD_REQD_WORK_GROUP_SIZE
#define __kernel __kernel __attribute__((reqd_work_group_size(KAD_REQD_WORK_GROUP_SIZE)))
#define kernel __kernel
#endif

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

#endif /* source form */

/* Below, both forms. __KAD_LINEAR and __KAD_CHECK_BOUNDS are literals in the
 * source form, so `if` on them emits only the taken branch. */

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
  if (__KAD_LINEAR) {
    /* One hardware dimension: recover the Cartesian group by unsigned division. */
    kad_uint g = (kad_uint)get_group_id(0);
    __KAD_UNROLL
    for (uint k = 0; k < d; ++k) g /= __kad_ngroups(c, k);
    return g % __kad_ngroups(c, d);
  }
  (void)c;
  return __kad_hw_group(d);
}

KAD_INLINE kad_uint __kad_local_d(const kad_context* c, uint d) {
  if (__KAD_LINEAR) {
    kad_uint l = (kad_uint)get_local_id(0);
    __KAD_UNROLL
    for (uint k = 0; k < d; ++k) l /= __kad_groupsize(c, k);
    return l % __kad_groupsize(c, d);
  }
  (void)c;
  return __kad_hw_local(d);
}

/* Position of this lane in the (unpadded) ndrange, dimension d, no offset. */
KAD_INLINE kad_uint __kad_pos(const kad_context* c, uint d) {
  return __kad_group_d(c, d) * __kad_groupsize(c, d) + __kad_local_d(c, d);
}

KAD_INLINE long __kad_global_index(const kad_context* c, uint d) {
  if (d >= __KAD_RANK) return 0;
  return __kad_offset(c, d) + (long)__kad_pos(c, d);
}

KAD_INLINE long __kad_global_linear(const kad_context* c) {
  kad_uint linear = 0, stride = 1;
  __KAD_UNROLL
  for (uint d = 0; d < __KAD_RANK; ++d) {
    linear += __kad_pos(c, d) * stride;
    stride *= __kad_extent(c, d);
  }
  return (long)linear;
}

KAD_INLINE long __kad_local_index(const kad_context* c, uint d) {
  return d < __KAD_RANK ? (long)__kad_local_d(c, d) : 0;
}

KAD_INLINE long __kad_local_linear(const kad_context* c) {
  if (__KAD_LINEAR) return (long)get_local_id(0);
  kad_uint linear = 0, stride = 1;
  __KAD_UNROLL
  for (uint d = 0; d < __KAD_RANK; ++d) {
    linear += __kad_local_d(c, d) * stride;
    stride *= __kad_groupsize(c, d);
  }
  return (long)linear;
}

KAD_INLINE long __kad_group_index(const kad_context* c, uint d) {
  return d < __KAD_RANK ? (long)__kad_group_d(c, d) : 0;
}

KAD_INLINE long __kad_group_linear(const kad_context* c) {
  if (__KAD_LINEAR) return (long)get_group_id(0);
  kad_uint linear = 0, stride = 1;
  __KAD_UNROLL
  for (uint d = 0; d < __KAD_RANK; ++d) {
    linear += __kad_group_d(c, d) * stride;
    stride *= __kad_ngroups(c, d);
  }
  return (long)linear;
}

KAD_INLINE long __kad_ndrange_length(const kad_context* c) {
  long n = 1;
  __KAD_UNROLL
  for (uint d = 0; d < __KAD_RANK; ++d) n *= (long)__kad_extent(c, d);
  return n;
}

KAD_INLINE int __kad_active(const kad_context* c) {
  if (__KAD_CHECK_BOUNDS) {
    __KAD_UNROLL
    for (uint d = 0; d < __KAD_RANK; ++d)
      if (__kad_pos(c, d) >= __kad_extent(c, d)) return 0;
  }
  (void)c;
  return 1;
}

#define kad_global_index(d) __kad_global_index(&__kad_ctx, (d))
#define kad_global_linear() __kad_global_linear(&__kad_ctx)
#define kad_local_index(d) __kad_local_index(&__kad_ctx, (d))
#define kad_local_linear() __kad_local_linear(&__kad_ctx)
#define kad_group_index(d) __kad_group_index(&__kad_ctx, (d))
#define kad_group_linear() __kad_group_linear(&__kad_ctx)
#define kad_ndrange(d) ((d) < __KAD_RANK ? (long)__kad_extent(&__kad_ctx, (d)) : 1L)
#define kad_ndrange_offset(d) ((d) < __KAD_RANK ? (long)__kad_offset(&__kad_ctx, (d)) : 0L)
#define kad_ndrange_rank() __KAD_RANK
#define kad_ndrange_length() __kad_ndrange_length(&__kad_ctx)
#define kad_groupsize(d) ((d) < __KAD_RANK ? (long)__kad_groupsize(&__kad_ctx, (d)) : 1L)
#define kad_ngroups(d) ((d) < __KAD_RANK ? (long)__kad_ngroups(&__kad_ctx, (d)) : 1L)
#define kad_active() __kad_active(&__kad_ctx)

#endif /* !KAD_SPECIALIZATION_MODULE */
