/**
 * Deletions begun per local instance name, counted. A look at an instance that started before a
 * deletion of it (a listing, a describe) must not watch it again once the deletion unwatched it: a
 * look reads the name's mark when it starts and acts only while the mark is unchanged.
 */
export class DeletionMarks {
  private readonly counts = new Map<string, number>();

  /** The name's mark now (undefined: no deletion of it ever began here). */
  mark(name: string): number | undefined {
    return this.counts.get(name);
  }

  /** A deletion of `name` begins: every earlier mark of it is out of date. */
  begin(name: string): void {
    this.counts.set(name, (this.counts.get(name) ?? 0) + 1);
  }

  /** True while no deletion of `name` began since `mark` was read. */
  unchanged(name: string, mark: number | undefined): boolean {
    return this.counts.get(name) === mark;
  }
}
