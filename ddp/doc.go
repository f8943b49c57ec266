// Package ddp is symddp's data-parallel trainer.
//
// A Trainer lays a model's parameters and gradients out in two flat arenas in
// the symmetric heap of a comm.Comm, broadcasts PE 0's initial parameters,
// and then runs steps: every PE does forward and backward on its own shard of
// the global batch, the gradient arena is summed across PEs bucket by bucket
// while backward is still running, and every PE applies the same optimizer
// update, so that the replicas stay bitwise identical (CheckReplicas proves
// it by hashing the parameter arena on every PE).
//
// The data flow of one step has no copies between stages:
//
//	batch shard -> model.Forward/Backward (grads written into the grad arena)
//	            -> comm.IAllReduce per bucket as backward finishes it
//	            -> optimizer update over the param arena
//
// A minimal program, run as `train --pes 4` would run it:
//
//	c, _ := comm.Open("shm", cfg)
//	m, _ := models.New("mlp", models.Config{})
//	o, _ := optim.New("sgd", optim.Config{Momentum: 0.9})
//	t, _ := ddp.New(c, cpu.New(cpu.Options{}), m, o, ddp.Options{GlobalBatch: 256, Epochs: 5, LR: 0.05})
//	res, err := t.Fit(ctx, train, test)
package ddp
