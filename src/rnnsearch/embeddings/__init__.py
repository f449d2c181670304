"""Word vectors: gensim word2vec training (:mod:`.word2vec`), their evaluation
(:mod:`.evaluation`) and loading them into a model's embedding matrix (:mod:`.loading`)."""
