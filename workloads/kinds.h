// Factories for every workload kind; each parses its descriptor (UsageError on bad input).
#pragma once

#include <memory>

#include "backends/backend.h"
#include "workloads/workload.h"

namespace tb {

// gemm m=M [n=N] [k=K] [batch=B] [dtype=f32|bf16] [out=f32|bf16] [ta=n|t] [tb=n|t]
//      [alpha=A] [beta=B] [layout=plain|prepacked] [name=LABEL]
std::unique_ptr<Workload> make_gemm(const Descriptor& descriptor);

// conv mb= ic= ih= [iw=] oc= kh= [kw=] [sh=] [sw=] [ph=] [pw=]
//      [dir=fwd|bwd_data|bwd_weights] [dtype=f32|bf16] [name=LABEL]
std::unique_ptr<Workload> make_conv(const Descriptor& descriptor);

// stream [op=copy|scale|add|triad|dot] [n=ELEMENTS]; n defaults to 4x the last-level cache.
std::unique_ptr<Workload> make_stream(const Descriptor& descriptor, const DeviceInfo& device);

// transfer [dir=h2d|d2h|d2d] [bytes=N, multiple of 8] [memory=pinned|pageable]
std::unique_ptr<Workload> make_transfer(const Descriptor& descriptor);

// resnet50-train [batch=32] [image=224] [width=64] [classes=1000] [dtype=f32|bf16]
//                [layout=native|plain] [lr=0.1*batch/256]
std::unique_ptr<Workload> make_resnet50_train(const Descriptor& descriptor);
// batch=sweep: batch 1, 2, 4, ... and the largest batch whose planned step fits in
// `memory_available` on `backend` (null: unusable, one case); other descriptors unchanged.
std::vector<Descriptor> expand_resnet50_sweep(const Descriptor& descriptor, Backend* backend,
                                              std::uint64_t memory_available);

// bert-train [model=base|large|tiny] [batch=8] [seq=128] [dtype=f32|bf16]
//            [optimizer=adamw|lamb] [dropout=0.1] [lr=1e-4]
std::unique_ptr<Workload> make_bert_train(const Descriptor& descriptor);

// ttt-fashion-mnist [target=0.9] [batch=128] [dtype=f32|bf16] [epochs=3] [lr=0.1] [runs=1]
//                   [subset=N]
std::unique_ptr<Workload> make_ttt_fashion_mnist(const Descriptor& descriptor);
// ttt-mlm [target=0.175] [batch=32] [dtype=f32|bf16] [epochs=4] [lr=0.002] [runs=1] [seq=64]
//         [vocab=8192] [layers=2] [hidden=128] [dropout=0] [warmup=0.2] [subset=N]
std::unique_ptr<Workload> make_ttt_mlm(const Descriptor& descriptor);

// peak [dtype=f32|bf16] [iterations=N]
std::unique_ptr<Workload> make_peak(const Descriptor& descriptor);

}  // namespace tb
