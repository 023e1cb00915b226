// ds4server serve [--model PATH] [--config FILE] [--port N] [--<setting> VALUE]... [--print-config]
#include "apps/ds4server/app_model.h"
#include "apps/ds4server/commands.h"

namespace ds4::cli {
int cmd_serve(const Args& args) { return server::serve_main(args, load_for_settings); }
}  // namespace ds4::cli
