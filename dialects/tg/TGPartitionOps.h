//===- TGPartitionOps.h - ZeRO++'s hierarchical partition ops -*- C++ -*-===//

#ifndef TAILOR_DIALECTS_TG_TGPARTITIONOPS_H
#define TAILOR_DIALECTS_TG_TGPARTITIONOPS_H

#include "dialects/tg/TGOps.h"

#define GET_OP_CLASSES
#include "dialects/tg/TGPartitionOps.h.inc"

#endif // TAILOR_DIALECTS_TG_TGPARTITIONOPS_H
