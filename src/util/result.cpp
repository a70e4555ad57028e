#include "util/result.h"

#include <cstring>

namespace tally {

Error errnoError(int code, std::string what) {
  what += ": ";
  what += std::strerror(code);
  return Error{code, std::move(what)};
}

}  // namespace tally
