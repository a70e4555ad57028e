// The RPC reads its messages' fields with the one JSON field reader
// (util/json_fields.h), under the names its decoders have always used.
#pragma once

#include "util/json_fields.h"

namespace tally::rpc::api {

using jsonfields::Fields;
using jsonfields::shown;

}  // namespace tally::rpc::api
