#include "munge_auth.h"

#include <munge.h>

#include <cstdlib>
#include <memory>

namespace bcs {
namespace {

struct CtxFree {
  void operator()(munge_ctx_t c) const { munge_ctx_destroy(c); }
};
using Ctx = std::unique_ptr<std::remove_pointer_t<munge_ctx_t>, CtxFree>;

Ctx make_ctx(const std::string& socket, std::string* why) {
  Ctx ctx(munge_ctx_create());
  if (!ctx) {
    *why = "munge: out of memory";
    return nullptr;
  }
  if (munge_ctx_set(ctx.get(), MUNGE_OPT_SOCKET, socket.c_str()) != EMUNGE_SUCCESS) {
    *why = "munge: cannot use socket " + socket;
    return nullptr;
  }
  return ctx;
}

}  // namespace

std::optional<std::string> munge_credential(const std::string& socket, std::string* why) {
  Ctx ctx = make_ctx(socket, why);
  if (!ctx) return std::nullopt;
  char* cred = nullptr;
  const munge_err_t e = munge_encode(&cred, ctx.get(), nullptr, 0);
  if (e != EMUNGE_SUCCESS) {
    *why = std::string("munge (") + socket + "): " + munge_ctx_strerror(ctx.get());
    std::free(cred);
    return std::nullopt;
  }
  std::string out(cred);
  std::free(cred);
  return out;
}

std::optional<MungeIdentity> munge_verify(const std::string& cred, const std::string& socket,
                                          std::string* why) {
  Ctx ctx = make_ctx(socket, why);
  if (!ctx) return std::nullopt;
  MungeIdentity id;
  void* payload = nullptr;
  int len = 0;
  const munge_err_t e = munge_decode(cred.c_str(), ctx.get(), &payload, &len, &id.uid, &id.gid);
  std::free(payload);
  if (e != EMUNGE_SUCCESS) {
    *why = std::string("munge credential refused: ") + munge_ctx_strerror(ctx.get());
    return std::nullopt;
  }
  return id;
}

}  // namespace bcs
