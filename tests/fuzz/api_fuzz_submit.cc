// The Submit side of the API fuzzer: streams of launches, waits, copies and
// pings, and what the model expects of each reply.
#include <algorithm>
#include <cmath>
#include <vector>

#include "tests/fuzz/api_fuzz_fuzzer.h"

namespace kad::api_fuzz {
namespace {

// A kernel kad compiles and runs, given arguments of its signature.
bool runnable(const KernelModel& k) {
  const Program* p = k.module.program;
  return p && k.module.intact && k.entry && k.signature_matches && k.options_allowed &&
         (k.module.ir || (!p->broken && (!p->needs_define_x || k.options_define_x)));
}

// Where a launch's kernel came from, for reports.
std::string origin(const KernelModel* k) {
  return k ? "kernel: " + cut(brief_text(k->request), 400) + " of a module of " + k->module.what
           : "";
}

}  // namespace

void Fuzzer::fill_launch(SessionModel& s, v1::Launch* l) {
  std::vector<uint64_t> runnable_kernels;
  for (const auto& [h, k] : s.kernels)
    if (runnable(k)) runnable_kernels.push_back(h);
  // Half the launches are meant to run; the rest are anything.
  const bool clean = !runnable_kernels.empty() && rng_.chance(0.5);
  l->set_kernel(clean ? rng_.pick(runnable_kernels) : pick_handle(s, Kind::kKernel));
  const auto found = s.kernels.find(l->kernel());
  const KernelModel* k = found == s.kernels.end() ? nullptr : &found->second;

  // Sizes: mostly cheap, now and then refused or huge; a static size mostly
  // left to the kernel.
  const bool static_ndrange = k && k->request.has_static_ndrange();
  const bool static_workgroup = k && k->request.has_static_workgroup();
  if (clean) {
    if (!static_ndrange) *l->mutable_ndrange() = make_ndrange(SizeClass::kCheap);
    if (!static_workgroup && rng_.chance(0.3))
      *l->mutable_workgroup() = make_workgroup(SizeClass::kCheap);
  } else {
    const uint64_t ndrange_style = rng_.weighted({static_ndrange ? 65.0 : 6.0, 15, 80});
    if (ndrange_style == 1 && static_ndrange) {
      *l->mutable_ndrange() = k->request.static_ndrange();
    } else if (ndrange_style >= 1) {
      *l->mutable_ndrange() = make_ndrange(static_cast<SizeClass>(rng_.weighted({80, 17, 3})));
    }
    const uint64_t workgroup_style = rng_.weighted({static_workgroup ? 65.0 : 60.0, 15, 25});
    if (workgroup_style == 1 && static_workgroup) {
      *l->mutable_workgroup() = k->request.static_workgroup();
    } else if (workgroup_style >= 1) {
      *l->mutable_workgroup() =
          make_workgroup(rng_.chance(0.7) ? SizeClass::kCheap : SizeClass::kRefused);
    }
  }

  // Arguments: as the kernel's signature declares them (distinct buffers,
  // when the session has enough), now and then changed; or anything.
  if (k && (clean || rng_.chance(0.8))) {
    std::vector<uint64_t> own = handles(s, Kind::kBuffer);
    rng_.shuffle(own);
    size_t next_buffer = 0;
    for (const v1::ArgSpec& spec : k->request.args()) {
      v1::KernelArg* a = l->add_args();
      switch (spec.kind()) {
        case v1::ARG_KIND_BUFFER:
        case v1::ARG_KIND_CONST_BUFFER:
          a->set_buffer(!own.empty() && (clean || rng_.chance(0.93))
                            ? own[next_buffer++ % own.size()]
                            : pick_handle(s, Kind::kBuffer));
          break;
        case v1::ARG_KIND_LOCAL:
          a->set_local_bytes(clean || rng_.chance(0.85)
                                 ? rng_.pick<uint64_t>({4, 16, 256, 1024, 4096})
                                 : rng_.pick<uint64_t>({0, device_.local_memory_bytes,
                                                        device_.local_memory_bytes + 1,
                                                        uint64_t{1} << 32, UINT64_MAX}));
          break;
        default:
          a->set_scalar_bits(scalar_bits());
          a->set_scalar(clean || rng_.chance(0.92) ? spec.scalar()
                                                   : static_cast<v1::ScalarType>(rng_.pick<int>(
                                                         {1, 5, 6, 7, 9, 10, 11, 0, 12, -3})));
          break;
      }
    }
    if (!clean && rng_.chance(0.2)) {
      switch (rng_.below(3)) {
        case 0:
          if (l->args_size() > 0) l->mutable_args()->RemoveLast();
          break;
        case 1:
          l->add_args()->set_scalar_bits(scalar_bits());
          break;
        default:
          if (l->args_size() > 0)
            l->mutable_args(static_cast<int>(rng_.below(static_cast<uint64_t>(l->args_size()))))
                ->Clear();
          break;
      }
    }
  } else {
    for (uint64_t n = rng_.below(10); n > 0; --n) {
      v1::KernelArg* a = l->add_args();
      switch (rng_.weighted({4, 4, 3, 1})) {
        case 0:
          a->set_buffer(pick_handle(s, Kind::kBuffer));
          break;
        case 1:
          a->set_scalar_bits(scalar_bits());
          a->set_scalar(static_cast<v1::ScalarType>(rng_.pick<int>({1, 5, 8, 10, 11, 0, 13})));
          break;
        case 2:
          a->set_local_bytes(rng_.pick<uint64_t>({0, 4, 1024, UINT64_MAX}));
          break;
        default:
          break;  // no value
      }
    }
  }

  // Element counts: a kernel that writes stays inside the buffers it is given.
  if (k && k->entry && k->signature_matches && l->args_size() == k->request.args_size()) {
    uint64_t elements = UINT32_MAX;
    for (int i = 0; i < l->args_size(); ++i) {
      if (l->args(i).value_case() != v1::KernelArg::kBuffer) continue;
      const auto b = s.buffers.find(l->args(i).buffer());
      elements = std::min<uint64_t>(elements, b == s.buffers.end() ? 0 : b->second.size / 4);
    }
    for (size_t i = 0; i < k->entry->parameters.size(); ++i) {
      v1::KernelArg* a = l->mutable_args(static_cast<int>(i));
      if (k->entry->parameters[i].is_element_count && a->value_case() == v1::KernelArg::kScalarBits)
        a->set_scalar_bits(rng_.chance(0.8) ? elements : rng_.below(elements + 1));
    }
  }
  for (const v1::KernelArg& a : l->args()) {
    if (a.value_case() == v1::KernelArg::kBuffer) {
      const auto b = s.buffers.find(a.buffer());
      if (b != s.buffers.end()) b->second.zeroed = false;
    }
  }
}

LaunchPlan Fuzzer::plan_launch(const SessionModel& s, uint64_t queue, const v1::Launch& l) const {
  LaunchPlan plan;
  const auto found = s.kernels.find(l.kernel());
  const KernelModel* k = found == s.kernels.end() ? nullptr : &found->second;
  plan.kernel = k;
  Defects& d = plan.defects;
  unknown_handle_defect(s, Kind::kKernel, l.kernel(), "an unknown kernel", &d);

  // Argument defects, against the signature the kernel declared.
  if (k) {
    if (l.args_size() != k->request.args_size())
      d.add(StatusCode::INVALID_ARGUMENT, "another argument count than the signature");
    for (int i = 0; i < l.args_size() && i < k->request.args_size(); ++i) {
      const v1::KernelArg& a = l.args(i);
      const v1::ArgSpec& spec = k->request.args(i);
      const bool buffer_spec =
          spec.kind() == v1::ARG_KIND_BUFFER || spec.kind() == v1::ARG_KIND_CONST_BUFFER;
      if ((buffer_spec && a.value_case() != v1::KernelArg::kBuffer) ||
          (spec.kind() == v1::ARG_KIND_LOCAL && a.value_case() != v1::KernelArg::kLocalBytes) ||
          (spec.kind() == v1::ARG_KIND_SCALAR &&
           (a.value_case() != v1::KernelArg::kScalarBits || a.scalar() != spec.scalar()))) {
        d.add(StatusCode::INVALID_ARGUMENT, "an argument the signature does not declare");
        break;
      }
    }
    // Const buffers are restrict (DESIGN §4): none may also be written.
    for (int i = 0; i < l.args_size() && i < k->request.args_size(); ++i) {
      if (k->request.args(i).kind() != v1::ARG_KIND_CONST_BUFFER) continue;
      for (int j = 0; j < l.args_size() && j < k->request.args_size(); ++j) {
        if (k->request.args(j).kind() == v1::ARG_KIND_BUFFER &&
            l.args(i).value_case() == v1::KernelArg::kBuffer &&
            l.args(j).value_case() == v1::KernelArg::kBuffer &&
            l.args(i).buffer() == l.args(j).buffer())
          d.add(StatusCode::INVALID_ARGUMENT, "a const buffer also passed as a written one");
      }
    }
  }
  for (const v1::KernelArg& a : l.args()) {
    if (a.value_case() == v1::KernelArg::VALUE_NOT_SET)
      d.add(StatusCode::INVALID_ARGUMENT, "an argument with no value");
    if (a.value_case() == v1::KernelArg::kScalarBits && scalar_size(a.scalar()) == 0)
      d.add(StatusCode::INVALID_ARGUMENT, "a scalar of no type kad.v1 has");
    if (a.value_case() == v1::KernelArg::kBuffer)
      unknown_handle_defect(s, Kind::kBuffer, a.buffer(), "an unknown buffer", &d);
  }

  // Size defects, on the sizes the launch gets: its own, else the kernel's static ones.
  const bool static_ndrange = k && k->request.has_static_ndrange();
  const bool static_workgroup = k && k->request.has_static_workgroup();
  const v1::NdRange* ndrange = l.has_ndrange()  ? &l.ndrange()
                               : static_ndrange ? &k->request.static_ndrange()
                                                : nullptr;
  const v1::Workgroup* workgroup = l.has_workgroup()  ? &l.workgroup()
                                   : static_workgroup ? &k->request.static_workgroup()
                                                      : nullptr;
  if (l.has_ndrange()) ndrange_defects(l.ndrange(), "the ndrange", &d);
  if (l.has_workgroup()) workgroup_defects(l.workgroup(), "the workgroup", &d);
  if (k && !ndrange) d.add(StatusCode::INVALID_ARGUMENT, "a dynamic ndrange and none given");
  if (static_ndrange && l.has_ndrange() && !same_ndrange(l.ndrange(), k->request.static_ndrange()))
    d.add(StatusCode::INVALID_ARGUMENT, "an ndrange other than the static one");
  if (static_workgroup && l.has_workgroup() &&
      !same_workgroup(l.workgroup(), k->request.static_workgroup()))
    d.add(StatusCode::INVALID_ARGUMENT, "a workgroup other than the static one");
  if (!ndrange) return plan;
  const bool valid_extents = ndrange->extents_size() <= 8 &&
                             std::none_of(ndrange->extents().begin(), ndrange->extents().end(),
                                          [](int64_t e) { return e < 0; });
  plan.empty = valid_extents && std::any_of(ndrange->extents().begin(), ndrange->extents().end(),
                                            [](int64_t e) { return e == 0; });
  if (plan.empty || !valid_extents) return plan;  // kad compiles and runs nothing for it

  // What only a launch with work to do is checked for.
  const long double items = product(ndrange->extents());
  plan.huge = items >= kHugeItems && items <= kMaxItems;
  if (items > kMaxItems) d.add(StatusCode::INVALID_ARGUMENT, "more than 2^63 - 1 work-items");
  if (workgroup &&
      product(workgroup->sizes()) > static_cast<long double>(device_.max_workgroup_size))
    d.add(StatusCode::INVALID_ARGUMENT, "a workgroup over the device's maximum");
  for (const v1::KernelArg& a : l.args()) {
    if (a.value_case() == v1::KernelArg::kLocalBytes &&
        a.local_bytes() > device_.local_memory_bytes) {
      d.add(StatusCode::INVALID_ARGUMENT, "more local memory than the device has");
      break;
    }
  }
  if (k && k->module.intact) {
    const Program* p = k->module.program;
    if (!p) d.add(StatusCode::INVALID_ARGUMENT, "a module of garbage");
    if (p && !k->module.ir && (p->broken || (p->needs_define_x && !k->options_define_x)))
      d.add(StatusCode::INVALID_ARGUMENT, "a kernel that does not compile");
    if (p && !k->entry) d.add(StatusCode::NOT_FOUND, "an entry the module does not have");
    if (k->entry && !k->signature_matches)
      d.add(StatusCode::INVALID_ARGUMENT, "a signature that does not match the kernel");
    if (!k->options_allowed)
      d.add(StatusCode::INVALID_ARGUMENT, "a build option off the allow-list");
  }

  // The work an accepted launch runs: with a workgroup, the padded ndrange;
  // tuned, each extent padded to at most twice itself.
  const int rank = std::max(ndrange->extents_size(), workgroup ? workgroup->sizes_size() : 0);
  long double cost = 1;
  for (int i = 0; i < rank; ++i) {
    const long double e = i < ndrange->extents_size() ? ndrange->extents(i) : 1;
    if (workgroup) {
      const long double w =
          std::max<long double>(1, i < workgroup->sizes_size() ? workgroup->sizes(i) : 1);
      cost *= std::ceil(e / w) * w;
    } else {
      cost *= 2 * e;
    }
  }
  plan.cost = cost;

  // A launch kad.proto allows and nothing in it can fail: it must run.
  plan.must_run = d.empty() && k && k->module.program == &programs()[0] && !k->module.ir &&
                  runnable(*k) && k->options_plain && !static_ndrange && !static_workgroup &&
                  l.has_ndrange() && !l.has_workgroup() && l.ndrange().extents_size() >= 1 &&
                  l.ndrange().extents_size() <= 3 && l.ndrange().offsets().empty() &&
                  items <= kCheapItems && has(s, Kind::kQueue, queue) &&
                  std::all_of(l.args().begin(), l.args().end(), [](const v1::KernelArg& a) {
                    return a.value_case() != v1::KernelArg::kLocalBytes ||
                           (a.local_bytes() >= 4 && a.local_bytes() <= 4096);
                  });
  return plan;
}

Pending Fuzzer::next_command(const Target& t, StreamState& st, bool first) {
  SessionModel& s = *t.session;
  Pending p;
  v1::QueueCommand& c = p.command;
  if (first) {
    c.set_queue(st.first_queue);
  } else {
    switch (rng_.weighted({55, 42, 3})) {
      case 0:
        c.set_queue(st.bound);
        break;
      case 1:
        break;  // 0: the stream's queue
      default:
        c.set_queue(pick_handle(s, Kind::kQueue));
        break;
    }
  }
  c.set_tag(st.next_tag++);
  // The first command naming a queue binds the stream to it.
  if (st.bound == 0) st.bound = c.queue();
  p.queue = st.bound;
  // What the stream's queue makes wrong with any command but a ping.
  Defects queue_defects;
  unknown_handle_defect(s, Kind::kQueue, p.queue, "an unknown queue", &queue_defects);
  if (c.queue() != 0 && c.queue() != st.bound)
    queue_defects.add(StatusCode::INVALID_ARGUMENT, "a queue other than the stream's");
  p.defects = queue_defects;

  auto known_buffer = [&](uint64_t handle) -> BufferModel* {
    const auto b = s.buffers.find(handle);
    return b == s.buffers.end() ? nullptr : &b->second;
  };
  switch (rng_.weighted({45, 20, 12, 12, 8, 3})) {
    case 0: {
      p.call = Call::kLaunch;
      fill_launch(s, c.mutable_launch());
      p.launch = plan_launch(s, p.queue, c.launch());
      p.launch.must_run = p.launch.must_run && queue_defects.empty();
      p.defects.append(p.launch.defects);
      break;
    }
    case 1: {
      p.call = Call::kWait;
      const auto q = s.queues.find(p.queue);
      const uint64_t last = q == s.queues.end() ? 0 : q->second.last_event;
      const uint64_t possible = q == s.queues.end() ? 0 : last + q->second.unanswered_launches;
      switch (rng_.weighted({20, 35, 25, 10, 10})) {
        case 0:
          c.mutable_wait()->set_event(0);
          break;
        case 1:
          c.mutable_wait()->set_event(last == 0 ? 0 : 1 + rng_.below(last));
          break;
        case 2:
          c.mutable_wait()->set_event(possible + 1 + rng_.pick<uint64_t>({0, 1, 2, 1000}));
          break;
        case 3:
          c.mutable_wait()->set_event(UINT64_MAX);
          break;
        default:
          c.mutable_wait()->set_event(rng_.bits());
          break;
      }
      if (q != s.queues.end() && c.wait().event() > possible)
        p.defects.add(StatusCode::NOT_FOUND, "an event never issued");
      p.exact = true;
      break;
    }
    case 2: {
      p.call = Call::kCopyIn;
      v1::CopyIn* in = c.mutable_copy_in();
      in->set_buffer(pick_handle(s, Kind::kBuffer));
      BufferModel* b = known_buffer(in->buffer());
      const uint64_t size = b ? b->size : 4096;
      const uint64_t length = rng_.chance(0.03) ? rng_.pick<uint64_t>({kMaxChunk, kMaxChunk + 1})
                                                : rng_.below(std::min<uint64_t>(size, 4096) + 1);
      in->set_offset(pick_offset(size, length));
      in->set_data(random_bytes(length));
      if (length > kMaxChunk) p.defects.add(StatusCode::INVALID_ARGUMENT, "over 1 MiB");
      unknown_handle_defect(s, Kind::kBuffer, in->buffer(), "an unknown buffer", &p.defects);
      if (b && (in->offset() > size || length > size - in->offset()))
        p.defects.add(StatusCode::OUT_OF_RANGE, "past the buffer's end");
      if (b && length > 0) b->zeroed = false;
      p.exact = true;
      break;
    }
    case 3: {
      p.call = Call::kCopyOut;
      v1::CopyOut* out = c.mutable_copy_out();
      out->set_buffer(pick_handle(s, Kind::kBuffer));
      const BufferModel* b = known_buffer(out->buffer());
      const uint64_t size = b ? b->size : 4096;
      out->set_size(pick_copy_length(size));
      out->set_offset(pick_offset(size, out->size()));
      if (out->size() > kMaxChunk) p.defects.add(StatusCode::INVALID_ARGUMENT, "over 1 MiB");
      unknown_handle_defect(s, Kind::kBuffer, out->buffer(), "an unknown buffer", &p.defects);
      if (b && (out->offset() > size || out->size() > size - out->offset()))
        p.defects.add(StatusCode::OUT_OF_RANGE, "past the buffer's end");
      p.copy_size = out->size();
      p.expect_zeros = b && b->zeroed;
      p.exact = true;
      break;
    }
    case 4:
      p.call = Call::kPing;
      c.mutable_ping();
      p.defects = Defects();  // kad.proto: a ping is answered OK, whatever the queue
      break;
    default:
      p.call = Call::kEmptyCommand;
      p.defects.add(StatusCode::INVALID_ARGUMENT, "no command");
      break;
  }
  return p;
}

bool Fuzzer::await_reply(const Target& t, SubmitStream& stream, std::deque<Pending>& awaiting) {
  v1::QueueReply reply;
  if (!stream.Read(&reply)) return false;
  const Pending p = std::move(awaiting.front());
  awaiting.pop_front();
  SessionModel& s = *t.session;
  const auto q = s.queues.find(p.queue);
  if (p.call == Call::kLaunch && t.live() && q != s.queues.end()) --q->second.unanswered_launches;
  const std::string request = t.in(brief_text(p.command));
  if (!t.live()) {
    violation("answered a command on a stream that names no open session", p.call,
              "  request: " + request + "\n  reply:   " + brief_text(reply), false);
    return true;
  }
  if (reply.tag() != p.command.tag()) {
    violation("a reply with another tag than its command", p.call,
              "  request: " + request + "\n  reply:   " + brief_text(reply), false);
  }
  const std::string context = origin(p.launch.kernel);
  check(p.call, request, reply.code(), reply.message(), p.defects, p.exact, false, {}, context);
  const std::string detail = "  request: " + cut(request, 600) +
                             "\n  reply:   " + cut(brief_text(reply), 600) +
                             (context.empty() ? "" : "\n  " + context);
  if (p.call == Call::kLaunch) {
    const LaunchPlan& plan = p.launch;
    if (plan.must_run && reply.code() != 0)
      violation("refused a launch kad.proto allows", p.call, detail, false);
    ++(reply.code() != 0 ? launches_refused_ : plan.empty ? launches_empty_ : launches_run_);
    if (reply.code() == 0) {
      if (q != s.queues.end()) q->second.last_event = std::max(q->second.last_event, reply.event());
      if (plan.empty && reply.event() != 0)
        violation("an empty launch answered with an event to wait for", p.call, detail, false);
      if (!plan.empty && reply.choice().index_bits() != 32 && reply.choice().index_bits() != 64)
        violation("a launch choice of neither 32- nor 64-bit indices", p.call, detail, false);
      if (plan.huge) {
        violation("accepted a launch of 2^" + std::to_string(std::ilogb(plan.cost / 2)) +
                      " or more work-items, which no CPU finishes (its queue is stuck)",
                  p.call, detail, true);
      } else if (!p.defects.empty() && plan.cost > kAffordableItems) {
        violation("accepted a launch that must be refused, of too much work to wait for", p.call,
                  detail, true);
      }
      if (!plan.empty && plan.kernel && plan.kernel->entry)
        compiled_.insert({plan.kernel->module.digest, plan.kernel->entry->name,
                          plan.kernel->request.build_options()});
    }
  }
  if (p.call == Call::kCopyOut && reply.code() == 0) {
    if (reply.data().size() != p.copy_size) {
      violation("copy_out answered another byte count than asked", p.call, detail, false);
    } else if (p.expect_zeros && std::any_of(reply.data().begin(), reply.data().end(),
                                             [](char c) { return c != 0; })) {
      violation("a buffer nothing wrote to reads back other than zeros", p.call, detail, false);
    }
  }
  return true;
}

void Fuzzer::submit(const Target& t) {
  SessionModel& s = *t.session;
  StreamState st;
  const std::vector<uint64_t> queues = handles(s, Kind::kQueue);
  st.first_queue =
      !queues.empty() && rng_.chance(0.9) ? rng_.pick(queues) : pick_handle(s, Kind::kQueue);
  st.next_tag = rng_.below(uint64_t{1} << 62);
  const uint64_t count = 1 + rng_.below(10);
  const bool pipelined = rng_.chance(0.4);
  // Cancelled before the command of this index (past the end: not at all).
  const uint64_t cancel_at = rng_.chance(0.08) ? 1 + rng_.below(count) : count;
  auto context = request_context(t.metadata);
  const auto started = Clock::now();
  auto stream = connection_.stub().Submit(context.get());
  std::deque<Pending> awaiting;
  bool cancelled = false, write_failed = false, read_ended = false;
  for (uint64_t i = 0; i < count && !write_failed && !read_ended && !stopped_; ++i) {
    if (i == cancel_at) {
      context->TryCancel();
      cancelled = true;
      break;
    }
    Pending p = next_command(t, st, i == 0);
    if (p.call == Call::kLaunch && p.defects.empty() && !p.launch.huge &&
        p.launch.cost > kAffordableItems) {
      journal_.add("#" + std::to_string(operation_) + " (not sent: a launch of about " +
                   std::to_string(static_cast<double>(p.launch.cost)) + " work-items)");
      continue;
    }
    if (p.call == Call::kLaunch && t.live()) {
      const auto q = s.queues.find(p.queue);
      if (q != s.queues.end()) ++q->second.unanswered_launches;
    }
    if (!stream->Write(p.command)) {
      write_failed = true;
      break;
    }
    awaiting.push_back(std::move(p));
    if (!pipelined) read_ended = !await_reply(t, *stream, awaiting);
  }
  // The replies still due, then the stream's end. After a failed write kad
  // has ended the stream, but what it sent before must still be read before
  // Finish returns.
  if (!cancelled) {
    while (!read_ended && !awaiting.empty()) read_ended = !await_reply(t, *stream, awaiting);
    if (!read_ended) {
      if (!write_failed) stream->WritesDone();
      v1::QueueReply extra;
      while (stream->Read(&extra))
        violation("a reply to no command", Call::kSubmit, "  reply: " + brief_text(extra), false);
    }
  }
  const grpc::Status status = stream->Finish();
  for (const Pending& p : awaiting) {
    journal_.add("#" + std::to_string(operation_) + " no reply to " +
                 cut(brief_text(p.command), 300) + " " + origin(p.launch.kernel));
  }
  const std::string text = t.in("a stream of ") + std::to_string(count) + " commands on queue " +
                           std::to_string(st.first_queue) + (pipelined ? ", pipelined" : "") +
                           (cancelled ? ", cancelled midway" : "");
  check(Call::kSubmit, text, status.error_code(), status.error_message(), t.session_defects,
        !t.live(), cancelled, Clock::now() - started);
  if (t.live() && !cancelled && status.ok() && !awaiting.empty()) {
    violation("a Submit stream ended OK with commands unanswered", Call::kSubmit,
              "  " + text + "; " + std::to_string(awaiting.size()) + " unanswered", false);
  }
}

}  // namespace kad::api_fuzz
