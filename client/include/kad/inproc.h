// The `inproc:` transport's hook: a program that links kad::inproc registers
// a factory for a channel to an engine in this process.
#pragma once

#include <functional>
#include <memory>

namespace grpc {
class Channel;
}

namespace kad::client {

using InprocChannelFactory = std::function<std::shared_ptr<grpc::Channel>()>;
void register_inproc(InprocChannelFactory factory);

}  // namespace kad::client
